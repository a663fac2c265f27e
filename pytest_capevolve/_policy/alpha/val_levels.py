"""What ``capevolve verify`` says of the run's α budget: the levels its gate decisions took.

Apart from :mod:`..budget.val_budget` so that verify does not import numpy and the statistics for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._decide import alpha_budget

if TYPE_CHECKING:
    from ..._store.rundir import RunDir


def level_problems(rundir: RunDir, events: list[dict[str, Any]] | None = None) -> list[str]:
    """One line per ``gate_decision`` that took another's level or whose α_j is not its schedule's."""
    import yaml

    alpha: float | None = None
    try:
        locked = yaml.safe_load(rundir.spec_lock_path.read_text(encoding="utf-8")) or {}
        found = locked.get("gate_alpha") if isinstance(locked, dict) else None
        if isinstance(found, int | float) and not isinstance(found, bool):
            alpha = float(found)
    except (OSError, yaml.YAMLError):
        pass  # no readable lock: the numbering is still checked
    lines = alpha_budget.slot_problems(rundir.log.events() if events is None else events, alpha)
    return [f"{rundir.events_path.name}: {line}" for line in lines]
