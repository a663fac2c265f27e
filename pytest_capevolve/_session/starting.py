"""Controller only: a capevolve session's kind chosen and started, its roles registered.

Imported by :func:`.wiring.configure` on the controller (or a session without workers) only: what
it imports (the session kinds, the outcome and its report, numpy) an xdist worker never needs."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from .._engine import confinement
from .._engine.candidate_bytes import RemoteWorkers, check_gateways, gateway_count
from .._items.plan import EvalPlan
from .._policy.alpha.gate_settings import check_margin, check_nulls, freeze_or_check, loop_default, overridden
from .._project import harness
from .._project.spec import Spec
from .._store.log.event_kinds import SESSION_STARTED
from .._store.memory import task_keys
from .._store.readers.harness_lock import check_or_lock
from .._store.rundir import RunDir, RunDirError
from . import selection
from .kinds import Started, choose_kind
from .kinds.base import HARNESS_NOW, SCHEDULE_WHY, TASK_KEYS_NOW
from .kinds.options import gate_request
from .outcome import Outcome, SessionEnd
from .persistence import summarize
from .plan_check import PlanCheck
from .planning import Planned
from .reporter import CapevolveReporter, Progress, are_missing, parse_failures
from .wiring import pool_digest


def start_controller(
    config: pytest.Config, spec: Spec, pool: dict[str, Any], *, split: str, given: list[str]
) -> tuple[Spec, EvalPlan, list[str]]:
    """The harness locked or checked, the session's kind started and its roles registered: the spec
    as the session runs it (a loop run's default schedule), its plan, and the rollouts ``given``
    names that it owes (sent to the workers)."""
    check_gateways(config, spec)
    harness_now = harness.of_project(spec, pool.values())
    # what pytest loaded from above the project is the harness too
    harness_now.update(harness.conftest_digests(config.pluginmanager.get_plugins(), spec.project_dir))
    config.stash[HARNESS_NOW] = harness_now
    config.stash[TASK_KEYS_NOW] = lambda: task_keys.of_pool(pool)
    existing = _existing_run(config, spec)
    if existing is not None:  # refused before anything is planned, claimed or paid
        check_or_lock(existing, harness_now, finalize=bool(config.option.capevolve_finalize))
    # a loop run spends α across its decisions unless told otherwise
    # (:mod:`.._policy.alpha.gate_settings`)
    spec, why = loop_default(spec, existing, overridden(config.option.override_ini, spec))
    config.stash[SCHEDULE_WHY] = why
    checked = existing.root if existing is not None else None
    plan = _start_controller(
        config, spec, sorted(pool), split=split, harness_now=harness_now, checked=checked
    )
    selected = _selected(config, spec, plan, given)
    if plan.owed_keys():  # what every worker's tasks() must give too (no worker: nothing owed)
        plan.pool_digest = pool_digest(pool)
    else:
        _without_workers(config)
    if plan.budget is not None:  # the ceilings' headroom is split between the workers
        plan.budget["workers"] = gateway_count(config)
    return spec, plan, selected


def _selected(config: pytest.Config, spec: Spec, plan: EvalPlan, given: list[str]) -> list[str]:
    """Controller only: the node ids given that name a rollout the plan owes (lines about the others go to
    the reporter). Ids given, none owed: the session runs in-process and collects nothing."""
    named = selection.named_rollouts(given, spec.path.name)
    selected, lines = selection.notes(config, plan, named, spec.path.name, spec.project_dir)
    reporter = config.pluginmanager.get_plugin("capevolve-reporter")
    if reporter is not None:
        reporter.notes += lines
        reporter.deselected_by = selection.deselecting(config)
    if named and not selected:
        _without_workers(config)
        config.pluginmanager.register(selection.NothingNamedIsOwed(), "capevolve-nothing-named")
    elif selected:
        config.pluginmanager.register(selection.SelectionToWorkers(selected), "capevolve-selection")
    return selected


def _without_workers(config: pytest.Config) -> None:
    """Nothing is owed: run in-process rather than start xdist workers (2–3 s each) for no item."""
    if config.getoption("dist", "no") != "no":
        config.option.dist = "no"
        config.option.tx = []
        config.option.numprocesses = 0


def _existing_run(config: pytest.Config, spec: Spec) -> RunDir | None:
    if config.option.capevolve_new_run:
        return None
    try:
        return RunDir.resolve(spec.project_dir, config.option.capevolve_run_id, create=False)
    except RunDirError:
        return None


def earlier_labels(rundir: RunDir) -> list[str | None]:
    """What each session of the run (this one included) said of its candidate code when it started."""
    try:
        started = rundir.log.of_kinds(SESSION_STARTED)
    except RunDirError:  # a log that does not verify is refused where a decision reads it
        return []
    return [event.get("candidate_code") for event in started]


def _start_controller(
    config: pytest.Config,
    spec: Spec,
    pool_ids: list[str],
    *,
    split: str,
    harness_now: dict[str, str],
    checked: Path | None,
) -> EvalPlan:
    """Choose the session's kind, start it, and register its roles the same way for every kind (the kind's
    plugins after persistence, so they see saved rollouts)."""
    option = config.option
    refuse_blocked_roles(config)
    deciding = _decides(config)
    if option.capevolve_gate:  # threshold with no null control: refused before anything is planned
        check_nulls(spec, gate_request(config, split, spec).nulls, overridden(option.override_ini, spec))
        check_margin(spec, bool(option.capevolve_sequential))
    decides_on_val = deciding or bool(option.capevolve_sequential)
    whole = decides_on_val or bool(option.capevolve_finalize)  # the plan's items exactly, in order
    kind_label = _kind_label(config, decides_on_val)
    if decides_on_val:  # -k, --deselect, --lf, -x ...: refused before anything is claimed or paid
        # (a finalize refuses them itself, naming its run, before it claims the seal)
        selection.refuse_selection(config, kind_label)
    started = choose_kind(config, split).start(config, spec, pool_ids, split)
    planned, persistence, rundir = started.planned, started.persistence, started.rundir
    # the labels this session's verdicts carry: its own rollouts', and the run's earlier sessions'
    confinement.begin(earlier_labels(rundir))
    plan_check = PlanCheck(planned.plan, spec.path.name, whole=whole, session_kind=kind_label)
    try:
        if rundir.root != checked:  # a new run locks its harness here, before any rollout
            check_or_lock(rundir, harness_now)
        if deciding:  # the first deciding session freezes the gate settings; a later one must match
            multiple = gate_request(config, split, spec).multiple if option.capevolve_gate else None
            freeze_or_check(rundir, spec, overridden(option.override_ini, spec), multiple)
    except RunDirError:
        rundir.claims.release()
        raise
    end = SessionEnd(
        started.role.conclude,
        planned.best,
        settle=persistence.settle,
        interrupted=lambda: _interrupted(config, spec, started),
        damage=persistence.damage_line,
        refusal=lambda: plan_check.refusal,
    )
    progress = Progress(spec, rundir, len(planned.plan.owed_keys()), option.capevolve_progress)
    completing = functools.partial(_resume_command, config, spec, planned, True)
    reporter = CapevolveReporter(rundir, end, persistence.tally, progress, completing, _failures(config))
    for name, plugin in (
        ("plan-check", plan_check),
        ("persistence", persistence),
        *started.plugins,
        ("session", started.role),
        ("end", end),
        ("reporter", reporter),
        ("remote", RemoteWorkers(config, spec)),
    ):
        if config.pluginmanager.register(plugin, f"capevolve-{name}") is None:  # blocked after all
            rundir.claims.release()
            raise pytest.UsageError(f"capevolve: the session's capevolve-{name} part could not be registered")
    if getattr(option, "xmlpath", None):  # --junitxml: flat properties, a testcase per verdict
        from .junit import JunitReport

        config.pluginmanager.register(JunitReport(config, end), "capevolve-junitxml")
    return planned.plan


# what only makes a session faster or leaner, and may be turned off by name (``-p no:…``) to
# compare: the same records either way
SPEED_PARTS = frozenset(
    {"capevolve-retention", "capevolve-protocol", "capevolve-heap", "capevolve-fanout", "capevolve-ahead"}
)


def refuse_blocked_roles(config: pytest.Config) -> None:
    """A session part blocked with ``-p no:capevolve-<part>`` (a finalize once ran 17 of 24 test rollouts
    without its plan check): refused before anything is planned, but :data:`SPEED_PARTS`."""
    parts = [
        arg[3:].strip() for arg in getattr(config.option, "plugins", None) or [] if arg.startswith("no:")
    ]
    blocked = [part for part in parts if part.startswith("capevolve-") and part not in SPEED_PARTS]
    if blocked:
        raise pytest.UsageError(
            f"capevolve: -p no:{blocked[0]} would run the session without a part of its own; "
            "refused before anything is planned (run it without that option)"
        )
    if config.getoption("dist", "no") == "each":  # every item on every worker
        raise pytest.UsageError(
            "capevolve: --dist each runs every rollout on every worker, so each would be paid once "
            "per worker; refused before anything is planned (use -n N, which is --dist load)"
        )


def _failures(config: pytest.Config) -> str | int:
    given = config.option.capevolve_failures
    if given is not None:
        return given
    try:
        return parse_failures(str(config.getini("capevolve_failures") or "auto"))
    except ValueError as exc:
        raise pytest.UsageError(f"ini capevolve_failures: {exc}") from exc


def _kind_label(config: pytest.Config, deciding: bool) -> str:
    option = config.option
    if option.capevolve_finalize:
        return "a finalize"
    if option.capevolve_sequential or option.capevolve_gate:
        return "a gate"
    return "a deciding session" if deciding else "an evaluation"


def _decides(config: pytest.Config) -> bool:
    """Whether this session decides anything (gate, grow, screen kill): then it reads the frozen settings."""
    option = config.option
    return bool(option.capevolve_gate or option.capevolve_grow or option.capevolve_screen is not None)


def _interrupted(config: pytest.Config, spec: Spec, started: Started) -> Outcome:
    """After Ctrl-C: the table of what is persisted and the command that resumes."""
    from .._store.readers.evidence import index_records

    planned, persistence = started.planned, started.persistence
    persistence.rundir.claims.release()
    plan = planned.plan
    records = index_records(started.persisted(), plan.block)
    outcome = summarize(plan, records, persistence.tally, against=planned.best)
    if started.interrupted_verdicts is not None:
        outcome.verdicts = started.interrupted_verdicts(records)
        outcome.nulls = [v for v in outcome.verdicts if v.tag in planned.null_tags]
    judged = "the sequential gate wrote what it reached" if outcome.verdicts else "nothing was judged"
    resume = _resume_command(config, spec, planned, False)
    if outcome.missing and resume == _resume_command(config, spec, planned, True):
        # the reporter prints this very command for the missing rollouts just above: said once
        outcome.say(
            f"interrupted: {judged}; the command above resumes it, paying only for what is missing",
            yellow=True,
        )
        return outcome
    outcome.say(
        f"interrupted: {are_missing(len(outcome.missing))}, {judged}; to resume, paying only for what is "
        "missing, run:",
        yellow=True,
    )
    outcome.say(f"  {resume}", yellow=True)
    return outcome


def _resume_command(config: pytest.Config, spec: Spec, planned: Planned, complete: bool) -> str:
    reran = [
        (c.tag, c.resolve_source(spec.project_dir))
        for c in planned.plan.candidates
        if c.tag != planned.best and c.tag not in planned.null_tags
    ]
    args = config.invocation_params.args
    return selection.resume_command(args, planned.plan.run_id, rerun_candidates=reran, complete=complete)
