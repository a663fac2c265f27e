"""Whether the optimizer was confined, as the process that started it says: never the optimizer.

``capevolve agent``'s broker or ``capevolve hill-climb`` passes it in :data:`OPTIMIZER_ENV` to
the commands it runs, and the record copies it. A confined agent cannot forge it, since the broker
builds each command's environment itself; a process of the same user outside the boundary can
(the threat model's broker section: not held)."""

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
