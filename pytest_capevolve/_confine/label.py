"""Whether the optimizer was confined, as the process that started it says: never the optimizer.

The process that starts the optimizer outside the boundary — ``capevolve agent``'s broker, or
``capevolve hill-climb`` — knows whether the kernel confined it, and passes that to the commands
it runs in :data:`OPTIMIZER_ENV`; the record copies it (``confinement.optimizer`` of every
verdict and decision event, :mod:`.._engine.confinement`). The agent cannot forge it: what it
runs reaches the evaluator through the broker, which builds each command's environment itself.
"""

from __future__ import annotations

import json
import os

from .landlock import Confinement

OPTIMIZER_ENV = "CAPEVOLVE_OPTIMIZER_CONFINEMENT"


def environment(state: Confinement, by: str) -> dict[str, str]:
    """The variable a command run for the optimizer carries (set by its starter, ``by``)."""
    return {OPTIMIZER_ENV: json.dumps({**state.as_json(), "label": state.label, "by": by}, sort_keys=True)}


def optimizer_label(environ: dict[str, str] | None = None) -> str | None:
    """The optimizer's label as its starter passed it; None when none did."""
    env = os.environ if environ is None else environ
    try:
        fields = json.loads(env.get(OPTIMIZER_ENV, ""))
    except ValueError:
        return None
    label = fields.get("label") if isinstance(fields, dict) else None
    return label if isinstance(label, str) else None
