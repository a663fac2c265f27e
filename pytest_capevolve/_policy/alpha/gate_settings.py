"""The gate settings a run decides under, frozen at its first deciding session.

A rule picked per session, after seeing the data, is a way to accept noise: the first deciding session logs
its settings, a later one whose settings differ is refused before it pays (a new rule is a new run), every
verdict records and says them, and ``threshold`` with no null control is refused (its bar is a constant the
data never enters). A loop run (it holds work copies or hill-climb started it) takes
:data:`..._decide.alpha_budget.LOOP_SCHEDULE` at its first decision unless the spec or the command line names
a schedule (an agent's gate command names none and would freeze ``constant``); ``capevolve verify`` checks
here the levels the run's gate decisions took. No numpy imported. Controller only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..._decide.alpha_budget import LOOP_SCHEDULE, SCHEDULES, slot_problems
from ..._project.spec import Spec
from ..._project.way_on import pasteable
from ..._project.yamlfile import YamlError, read_yaml
from ..._store.files import RunDirError
from ..._store.log.event_kinds import GATE_SETTINGS_FROZEN
from ..._store.rundir import RunDir

GATE_SETTING_KEYS = (
    "gate_mode", "gate_alpha", "gate_k_se", "gate_threshold", "min_coverage", "gate_alpha_schedule",
    "gate_min_effect", "gate_margin", "screen_alpha", "grow_max_looks",
)  # fmt: skip
# a session's own choice frozen beside them: the family-wise correction across a round's
# siblings (``--capevolve-multiple``); ``none`` picked after a Holm round rejected is a way to
# accept what that round refused
MULTIPLE_KEY = "multiple"


def _as_frozen(was: Mapping[str, Any]) -> dict[str, Any]:
    """A frozen event's settings; without ``gate_margin``, the run was frozen before the key: 0 ("better")."""
    return {"gate_margin": 0.0, **was}


def settings_of(spec: Spec) -> dict[str, Any]:
    return {key: getattr(spec, key) for key in GATE_SETTING_KEYS}


def overridden(override_ini: Iterable[str] | None, spec: Spec) -> dict[str, str]:
    """The gate settings the command line set (``-o``, as typed) that the spec does not pin."""
    found: dict[str, str] = {}
    for item in override_ini or ():
        name, _, value = str(item).partition("=")
        key = name.strip().removeprefix("capevolve_")
        if name.strip().startswith("capevolve_") and key in GATE_SETTING_KEYS:
            found[key] = value.strip()
    pinned = _pinned(spec) if found else {}  # the file is read only when the command line set one
    return {key: value for key, value in found.items() if key not in pinned}


def _pinned(spec: Spec) -> dict[str, Any]:
    """What the spec file sets itself (it loaded a moment ago: read again it can only be as it was)."""
    try:
        raw = read_yaml(spec.path)
    except YamlError:
        return {}
    return raw if isinstance(raw, dict) else {}


def guards_of(spec: Spec) -> dict[str, Any]:
    return {
        key: list(value) if isinstance(value := getattr(spec, key), tuple) else value
        for key in spec.GUARD_KEYS
    }


def guards_off(spec: Spec) -> str | None:
    if spec.leak_guard_min_length is None:
        return (
            "the leak guard is off (leak_guard_min_length: false, frozen with the run): a candidate "
            "holding a val or test task's id or gold answer was not refused"
        )
    return None


def said(overrides: Mapping[str, str]) -> str:
    return "overridden on the command line: " + ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))


def check_nulls(spec: Spec, nulls: int, overrides: Mapping[str, str]) -> None:
    if spec.gate_mode == "threshold" and nulls == 0:
        origin = f" ({said(overrides)})" if overrides else ""
        raise RunDirError(
            f"gate_mode threshold with --capevolve-null 0{origin}: a fixed bar (gate_threshold "
            f"{spec.gate_threshold:g}) without a null control measures no noise, so any lucky no-op "
            "clears it; keep --capevolve-null ≥ 1, or set gate_mode: exact"
        )


def check_margin(spec: Spec, sequential: bool) -> None:
    """Refuse a ``gate_margin`` the gate would not read: a legacy ``gate_mode``, or the sequential gate."""
    if not spec.gate_margin:
        return
    if spec.gate_mode != "exact":
        raise RunDirError(
            f"gate_margin {spec.gate_margin:g} is tested by the exact gate only (gate_mode "
            f"{spec.gate_mode} would ignore it and ask 'better'); set gate_mode: exact, or drop gate_margin"
        )
    if sequential:
        raise RunDirError(
            f"gate_margin {spec.gate_margin:g}: the sequential gate asks 'better' and cannot test a "
            "margin yet; gate without --capevolve-sequential (the fixed-n exact gate tests it)"
        )


def freeze_or_check(
    rundir: RunDir, spec: Spec, overrides: Mapping[str, str], multiple: str | None = None
) -> None:
    """Log the settings of the run's first deciding session; refuse a later one whose settings differ."""
    settings = settings_of(spec)
    if multiple is not None:
        settings[MULTIPLE_KEY] = multiple
    with rundir.lock():
        frozen = rundir.log.of_kinds(GATE_SETTINGS_FROZEN)
        if not frozen:
            rundir.log.append_event(GATE_SETTINGS_FROZEN, settings=settings, overridden=dict(overrides))
            return
    first = frozen[0]
    was = _as_frozen(first.get("settings") or {})
    if changed := [key for key in settings if key in was and was[key] != settings[key]]:
        shown = ", ".join(
            f"--capevolve-multiple {settings[key]} (frozen {was[key]})"
            if key == MULTIPLE_KEY
            else f"{key} {settings[key]!r} (frozen {was[key]!r})"
            for key in changed
        )
        origin = f"; {said(overrides)}" if overrides else ""
        raise RunDirError(
            f"run {rundir.run_id} froze its gate settings at its first decision (event seq "
            f"{first.get('seq')}): {shown}{origin}. Restore them, or start a new run (--capevolve-new-run) "
            "to decide under other settings"
        )


def decided_under(rundir: RunDir, spec: Spec) -> Spec:
    """``spec`` with the gate settings the run froze at its first decision (``spec`` before any)."""
    frozen = rundir.log.of_kinds(GATE_SETTINGS_FROZEN)
    settings = _as_frozen(frozen[0].get("settings") or {}) if frozen else {}
    known = {key: settings[key] for key in GATE_SETTING_KEYS if key in settings}
    return replace(spec, **known) if known else spec


KEY = "gate_alpha_schedule"


def is_loop_run(rundir: RunDir) -> bool:
    work = rundir.root / "work"
    return rundir.hill_climb_dir().is_dir() or (work.is_dir() and any(p.is_dir() for p in work.iterdir()))


def loop_default(spec: Spec, rundir: RunDir | None, overrides: Mapping[str, str]) -> tuple[Spec, str | None]:
    """(the spec a session on ``rundir`` decides under, why its schedule is the loop's, or None)."""
    if rundir is None or KEY in overrides or spec.gate_alpha_schedule != "constant" or KEY in _pinned(spec):
        return spec, None
    # a schedule the run froze at its first decision (by this default, or hill-climb's flag; `lord` in
    # a run begun before the default became `addis`): a later session that names none decides under it
    # too, not refused for asking constant
    schedule = frozen_schedule(rundir) or (LOOP_SCHEDULE if is_loop_run(rundir) else "constant")
    if schedule == "constant":
        return spec, None
    why = (
        f"gate_alpha_schedule {schedule}: a loop run's default (run {rundir.run_id} holds work "
        "copies or hill-climb drove it, and the spec names no schedule); one-shot gating keeps constant"
    )
    return replace(spec, gate_alpha_schedule=schedule), why


def frozen_schedule(rundir: RunDir) -> str | None:
    frozen = rundir.log.of_kinds(GATE_SETTINGS_FROZEN)
    found = (frozen[0].get("settings") or {}).get(KEY) if frozen else None
    return found if isinstance(found, str) and found in SCHEDULES else None


def run_loop_schedule(rundir: RunDir) -> str:
    """The schedule a loop's gates use when the spec names none: the one the run froze, else the loop's."""
    return frozen_schedule(rundir) or LOOP_SCHEDULE


def constant_run_note(rundir: RunDir, spec_names_one: bool) -> str | None:
    """One line for a loop on a run a one-shot gate froze at ``constant``: the cost, and the way on."""
    if spec_names_one or frozen_schedule(rundir) != "constant":
        return None
    return (
        f"run {rundir.run_id} froze gate_alpha_schedule constant at its first decision (a one-shot gate): "
        "this loop gates each candidate at the full α, so false accepts grow with the decisions (docs: α "
        f"across a run); for {LOOP_SCHEDULE}, start it in a new run: capevolve hill-climb --new-run (an "
        "accept of this run that its optimizer proposes again is adopted there, labelled with its level)"
        + _unscored_best(rundir)
    )


def _unscored_best(rundir: RunDir) -> str:
    """What a new run costs this run's accepted best while its test split is unscored: the test tasks are
    sealed for the project, so the tutorial's finalize of the newest run would spend them on the new one."""
    from ..._store.memory.seal import Seal

    best = rundir.state.best()
    if best == "seed" or Seal(rundir).burned() is not None:
        return ""
    return (
        f"; this run's best {best!r} stays here, its test split unscored, and the test tasks are sealed "
        "for the project: to report it held out, score it before finalizing the new run (pytest "
        f"--capevolve-finalize PROJECT --capevolve-run-id {rundir.run_id})"
    )


def handoff_schedule_note(spec: Spec, rundir: RunDir) -> str | None:
    """One line for ``baseline``: a one-shot gate before the first decision would freeze ``constant``."""
    if frozen_schedule(rundir) is not None or spec.gate_alpha_schedule != "constant" or KEY in _pinned(spec):
        return None
    return pasteable(
        f"these levels are the loop's (gate_alpha_schedule {LOOP_SCHEDULE}: hill-climb, or `capevolve "
        "work new` and the gate command in `next`); a one-shot gate of a candidate folder (pytest "
        "--capevolve-run PROJECT --capevolve-candidate CANDIDATE_FOLDER --capevolve-gate) as this run's "
        f"first decision gates at constant α = {spec.gate_alpha:g} instead and freezes that for the run",
        spec.project_dir,
    )


def next_decision_spec(spec: Spec, rundir: RunDir, *, loop: bool = False) -> Spec:
    """The spec the run's next decision is taken under (``loop``: the caller hands the run to a loop)."""
    if frozen_schedule(rundir) is not None:
        return decided_under(rundir, spec)
    if (loop or is_loop_run(rundir)) and spec.gate_alpha_schedule == "constant" and KEY not in _pinned(spec):
        return replace(spec, gate_alpha_schedule=LOOP_SCHEDULE)
    return decided_under(rundir, spec)


def level_problems(rundir: RunDir, events: list[dict[str, Any]] | None = None) -> list[str]:
    """One line per ``gate_decision`` that took another's level or whose α_j is not its schedule's."""
    alpha: float | None = None
    try:
        locked = read_yaml(rundir.spec_lock_path) or {}
        found = locked.get("gate_alpha") if isinstance(locked, dict) else None
        if isinstance(found, int | float) and not isinstance(found, bool):
            alpha = float(found)
    except (OSError, YamlError):
        pass  # no readable lock: the numbering is still checked
    lines = slot_problems(rundir.log.events() if events is None else events, alpha)
    return [f"{rundir.events_path.name}: {line}" for line in lines]
