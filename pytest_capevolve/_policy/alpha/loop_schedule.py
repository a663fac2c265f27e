"""A loop's error control by default: a run that is a loop spends α across its decisions.

An agent's gate command names no schedule and would freeze ``constant`` for the run, so a loop run (it holds
work copies or hill-climb started it) takes :data:`..._decide.alpha_budget.LOOP_SCHEDULE` at its first
decision unless the spec or the command line names one. ``capevolve verify`` checks here the levels the
run's gate decisions took (no numpy imported). Pays and writes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..._decide.alpha_budget import LOOP_SCHEDULE, SCHEDULES, slot_problems
from ..._project.spec import Spec
from ..._project.yamlfile import YamlError, read_yaml
from ..._store.log.event_kinds import GATE_SETTINGS_FROZEN
from ..._store.rundir import RunDir
from .gate_settings import decided_under

KEY = "gate_alpha_schedule"


def is_loop_run(rundir: RunDir) -> bool:
    work = rundir.root / "work"
    return rundir.hill_climb_dir().is_dir() or (work.is_dir() and any(p.is_dir() for p in work.iterdir()))


def _spec_names_one(spec: Spec) -> bool:
    try:
        raw = read_yaml(spec.path) or {}
    except YamlError:
        return False
    return isinstance(raw, dict) and KEY in raw


def loop_default(spec: Spec, rundir: RunDir | None, overrides: Mapping[str, str]) -> tuple[Spec, str | None]:
    """(the spec a session on ``rundir`` decides under, why its schedule is the loop's, or None)."""
    if rundir is None or KEY in overrides or spec.gate_alpha_schedule != "constant" or _spec_names_one(spec):
        return spec, None
    # a schedule the run froze at its first decision (by this default, or hill-climb's flag; `lord` in
    # a run begun before the default became `addis`): a later session that names none decides under it
    # too, not refused for asking constant
    schedule = frozen_schedule(rundir)
    if schedule is None:
        schedule = LOOP_SCHEDULE if is_loop_run(rundir) else "constant"
    if schedule == "constant":
        return spec, None
    return replace(spec, gate_alpha_schedule=schedule), _why(rundir, schedule)


def frozen_schedule(rundir: RunDir | None) -> str | None:
    if rundir is None:
        return None
    frozen = rundir.log.of_kinds(GATE_SETTINGS_FROZEN)
    found = (frozen[0].get("settings") or {}).get(KEY) if frozen else None
    return found if isinstance(found, str) and found in SCHEDULES else None


def run_loop_schedule(rundir: RunDir | None) -> str:
    """The schedule a loop's gates use when the spec names none: the one the run froze, else the loop's."""
    return frozen_schedule(rundir) or LOOP_SCHEDULE


def constant_run_note(rundir: RunDir, spec_names_one: bool) -> str | None:
    """One line for a loop on a run a one-shot gate froze at ``constant``: the cost, and the way on."""
    if spec_names_one or frozen_schedule(rundir) != "constant":
        return None
    return (
        f"run {rundir.run_id} froze gate_alpha_schedule constant at its first decision (a one-shot "
        "gate), so this loop gates each candidate at the full α: false accepts grow with the number "
        f"of decisions (docs: α across a run); for α spent across the loop ({LOOP_SCHEDULE}), start "
        "it in a new run: capevolve hill-climb --new-run"
    )


def handoff_schedule_note(spec: Spec, rundir: RunDir) -> str | None:
    """One line for ``baseline``: a one-shot gate before the first decision would freeze ``constant``."""
    if frozen_schedule(rundir) is not None or spec.gate_alpha_schedule != "constant" or _spec_names_one(spec):
        return None
    return (
        f"these levels are the loop's (gate_alpha_schedule {LOOP_SCHEDULE}: hill-climb, or `capevolve "
        "work new` and the gate command in `next`); a one-shot gate of a candidate folder (pytest "
        "--capevolve-run . --capevolve-candidate DIR --capevolve-gate) as this run's first decision "
        f"gates at constant α = {spec.gate_alpha:g} instead and freezes that for the run"
    )


def next_decision_spec(spec: Spec, rundir: RunDir, *, loop: bool = False) -> Spec:
    """The spec the run's next decision is taken under (``loop``: the caller hands the run to a loop)."""
    if frozen_schedule(rundir) is not None:
        return decided_under(rundir, spec)
    if (loop or is_loop_run(rundir)) and spec.gate_alpha_schedule == "constant" and not _spec_names_one(spec):
        return replace(spec, gate_alpha_schedule=LOOP_SCHEDULE)
    return decided_under(rundir, spec)


def _why(rundir: RunDir, schedule: str) -> str:
    return (
        f"gate_alpha_schedule {schedule}: a loop run's default (run {rundir.run_id} holds work "
        "copies or hill-climb drove it, and the spec names no schedule); one-shot gating keeps constant"
    )


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
    lines = slot_problems(rundir.log.events() if events is None else events, alpha)
    return [f"{rundir.events_path.name}: {line}" for line in lines]
