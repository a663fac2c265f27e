"""A loop's error control by default: a run that is a loop spends α across its decisions.

hill-climb passes ``-o capevolve_gate_alpha_schedule=lord`` to its gates, and PROCESS.md prints
that flag for the agent-mode hand-off — but an agent that leaves it out gated its work copies at
``constant`` α, and the first decision froze that for the whole run (:mod:`.gate_settings`). So a
run that *is* a loop run — it holds work copies (``capevolve work new``) or hill-climb started
it — takes the loop's schedule (:data:`.._decide.alpha_budget.LOOP_SCHEDULE`) at its first
decision unless the spec file names one or the command line sets one. One-shot gating (no work
copy) keeps ``constant``. A run whose settings are frozen already keeps what it froze.

Controller only, before the session plans; pays nothing, writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from .._decide.alpha_budget import LOOP_SCHEDULE
from .._project.spec import Spec
from .._project.yamlfile import YamlError, read_yaml
from .._store.rundir import RunDir

KEY = "gate_alpha_schedule"


def is_loop_run(rundir: RunDir) -> bool:
    """Whether the run holds work copies or hill-climb drove it."""
    work = rundir.root / "work"
    return rundir.hill_climb_dir().is_dir() or (work.is_dir() and any(p.is_dir() for p in work.iterdir()))


def _spec_names_one(spec: Spec) -> bool:
    try:
        raw = read_yaml(spec.path) or {}
    except YamlError:
        return False
    return isinstance(raw, dict) and KEY in raw


def loop_default(spec: Spec, rundir: RunDir | None, overrides: Mapping[str, str]) -> tuple[Spec, str | None]:
    """(the spec a session on ``rundir`` decides under, why its schedule is the loop's — None
    when it is not changed here)."""
    if rundir is None or KEY in overrides or spec.gate_alpha_schedule != "constant" or _spec_names_one(spec):
        return spec, None
    from .gate_settings import FROZEN_EVENT

    frozen = rundir.log.of_kinds(FROZEN_EVENT)
    if frozen:
        # the run froze the loop's schedule at its first decision (by this default, or hill-climb's
        # flag): a later session that names none decides under it too, not refused for asking constant
        settings = frozen[0].get("settings") or {}
        if settings.get(KEY) == LOOP_SCHEDULE:
            return replace(spec, gate_alpha_schedule=LOOP_SCHEDULE), _why(rundir)
        return spec, None
    if not is_loop_run(rundir):
        return spec, None
    return replace(spec, gate_alpha_schedule=LOOP_SCHEDULE), _why(rundir)


def _why(rundir: RunDir) -> str:
    return (
        f"gate_alpha_schedule {LOOP_SCHEDULE}: a loop run's default (run {rundir.run_id} holds work "
        "copies or hill-climb drove it, and the spec names no schedule); one-shot gating keeps constant"
    )
