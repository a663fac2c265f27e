"""Whether the optimizer was confined, as the record says it: one field, ``optimizer_confinement``.

The process that starts the optimizer outside the boundary — ``capevolve agent``'s broker, or
``capevolve hill-climb`` — knows whether the kernel confined it, and passes that to the commands
it runs in :data:`OPTIMIZER_ENV`; every decision event and verdict copies it. The agent cannot
forge it: what it runs reaches the evaluator through the broker, which builds the environment of
each command itself. A command run by a person outside any agent records "not started by
capevolve agent" — unconfined, as far as the record can tell.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .landlock import Confinement, abi, unavailable_reason

OPTIMIZER_ENV = "CAPEVOLVE_OPTIMIZER_CONFINEMENT"
NOT_STARTED = "the optimizer was not started by capevolve agent or capevolve hill-climb"


def offered() -> Confinement:
    """What a process confined now would be: the kernel's ABI, or unconfined with its reason."""
    version = abi()
    if version < 1:
        return Confinement(False, 0, unavailable_reason())
    return Confinement(True, version, "", scoped=version >= 6)


def recorded(state: Confinement, by: str) -> dict[str, Any]:
    """``state`` as the record holds it: the fields, the label, and who started the optimizer."""
    return {**state.as_json(), "label": state.label, "by": by}


def environment(state: Confinement, by: str) -> dict[str, str]:
    """The variable a command run for the optimizer carries (set by the starter, never the agent)."""
    return {OPTIMIZER_ENV: json.dumps(recorded(state, by), sort_keys=True)}


def optimizer_confinement(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The optimizer's confinement for the record, from :data:`OPTIMIZER_ENV`."""
    env = os.environ if environ is None else environ
    try:
        fields = json.loads(env.get(OPTIMIZER_ENV, ""))
    except ValueError:
        fields = None
    if isinstance(fields, dict) and isinstance(fields.get("confined"), bool):
        return fields
    return recorded(Confinement(False, 0, NOT_STARTED), by="")
