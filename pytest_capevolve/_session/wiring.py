"""Starting a capevolve session: the spec, the adapter, the plan, and the roles registered.

Called from ``pytest_configure`` only when a ``--capevolve-*`` session was asked for, so a
pytest run without one never imports any of this (nor numpy or scipy). In the controller
(the process without xdist, or xdist's controller) it plans and registers the controller
roles; on an xdist worker it only reads the plan the controller sent in ``workerinput``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .._engine.remote import RemoteWorkers, check_gateways, worker_target
from .._engine.runner import AdapterRunner, declared_thread_safe
from .._items.nodes import CONTEXT_KEY, EvalContext
from .._items.plan import WORKERINPUT_KEY, EvalPlan
from .._project.adapter import AdapterError, load_adapter, load_tasks
from .._project.candidate import SEED_TAG, CandidateError
from .._project.microcase import MicrocaseError
from .._project.spec import Spec, SpecError, load_spec
from .._project.splits import TestSealError
from .._store.record import RecordError, RolloutRecord
from .._store.rundir import RunDir, RunDirError
from .evaluation import EvaluationSession
from .outcome import Outcome, SessionEnd
from .perf import (
    fanout,
    heap,
    lean_protocol,
    retention,
)
from .persistence import Persistence, summarize
from .planning import (
    BudgetError,
    CandidateRequest,
    GateRequest,
    Planned,
    plan_evaluation,
)
from .progress import Progress
from .refusals import Screens
from .reporter import CapevolveReporter, rollouts
from .screen_or_grow import screen_or_grow, start_screen_or_grow

if TYPE_CHECKING:  # the other sessions' roles are imported by the session that uses them
    from .finalize import FinalizeSession
    from .grow import GrowSession
    from .sequential_gate import SequentialGate
    from .subset_screen import ScreenSession

COMMIT_MODES = ("auto", "none")


def configure(config: pytest.Config, target: str, *, finalize: bool, split: str, ini: dict[str, str]) -> None:
    """Load the project and, on the controller, plan and register the session's roles."""
    workerinput = getattr(config, "workerinput", None)
    on_copy = False
    try:
        if workerinput is not None:
            local = worker_target(workerinput, target)
            on_copy, target = local != target, local
        spec = load_spec(target, ini)
        adapter = load_adapter(spec.adapter, spec.project_dir)
        pool = load_tasks(adapter, spec.adapter)
        runner = AdapterRunner(adapter)
        width = fanout_width(config, spec, runner)  # refused before anything is planned or paid
        if workerinput is not None:
            plan = EvalPlan.from_wire(json.loads(workerinput[WORKERINPUT_KEY]))
        else:
            check_gateways(config, spec)
            plan = _start_controller(config, spec, sorted(pool), finalize=finalize, split=split)
            if not plan.owed_keys():
                _without_workers(config)
    except TestSealError as exc:
        raise pytest.UsageError(f"TestSealError: {exc}") from None
    except (
        SpecError,
        AdapterError,
        RunDirError,
        CandidateError,
        MicrocaseError,
        RecordError,
        BudgetError,
    ) as exc:
        raise pytest.UsageError(str(exc)) from None
    context = EvalContext(spec, plan, runner, pool, on_copy=on_copy)
    config.stash[CONTEXT_KEY] = context
    retention.register(config)  # every process keeps its items and reports to the end
    lean_protocol.register(config)  # every process runs its rollout items the lean way
    if width > 1 or runner.is_async:
        fanout.register(config, context, width)
    heap.register(config)
    config.args[:] = [str(spec.path)]  # the spec is the only thing a capevolve session collects


def _without_workers(config: pytest.Config) -> None:
    """Nothing is owed (a resume with everything persisted): xdist would start its workers —
    each importing the project, 2–3 s at ``-n 2`` — to run no item. The controller runs the empty
    session itself, as without ``-n`` (xdist reads these options in its own, later, configure)."""
    if config.getoption("dist", "no") != "no":
        config.option.dist = "no"
        config.option.tx = []
        config.option.numprocesses = 0


def fanout_width(config: pytest.Config, spec: Spec, runner: AdapterRunner) -> int:
    """Rollouts in flight per process: --capevolve-concurrency, else the spec's (or ini's)
    ``concurrency``. Refused above 1 for an adapter that is not thread-safe."""
    flag = config.option.capevolve_concurrency
    width = int(flag or spec.concurrency)
    if not declared_thread_safe(runner.adapter) and width > 1:
        asked = (
            f"--capevolve-concurrency {width}"
            if flag
            else f"concurrency {width} (from {spec.path.name}'s concurrency, or capevolve_concurrency ini)"
        )
        raise AdapterError(
            f"{asked}: adapter {spec.adapter} is not thread-safe (it declares "
            "thread_safe = False, or makes candidates live with apply()); run it with "
            "--capevolve-concurrency 1 and fan out with -n N workers instead"
        )
    return width


def _start_controller(
    config: pytest.Config, spec: Spec, pool_ids: list[str], *, finalize: bool, split: str
) -> EvalPlan:
    option = config.option
    role: EvaluationSession | FinalizeSession | ScreenSession | GrowSession
    planned: Planned
    if finalize:
        from .._store.seal import Seal
        from .finalize import FinalizeSession
        from .planning import plan_finalize

        rundir = RunDir.resolve(spec.project_dir, option.capevolve_run_id, create=False)
        seal = Seal(rundir)
        seal.claim()  # before anything is planned: a refused finalize pays and writes nothing
        try:
            planned = plan_finalize(spec, rundir, pool_ids, seal)
        except BaseException:
            seal.release()
            raise
        persistence = Persistence(config, spec, rundir, planned.plan)
        role = FinalizeSession(config, spec, rundir, planned, seal, persistence)
    elif (kind := screen_or_grow(config, split)) is not None:
        request = _candidate_requests(config, spec)[0] if kind == "screen" else None
        role, planned, persistence, rundir = start_screen_or_grow(config, spec, pool_ids, kind, request)
    else:
        gate = _gate_request(config, split)
        requests = _candidate_requests(config, spec)
        # One planner at a time per project (run creation) and per run (spec lock, splits,
        # snapshots, claims): sessions started together get one run and never pay twice.
        with RunDir.project_lock(spec.project_dir):
            rundir = RunDir.resolve(spec.project_dir, option.capevolve_run_id, option.capevolve_new_run)
            screens = Screens(spec, rundir, microcases=gate.enabled)
            try:
                with rundir.lock():
                    if gate.enabled:
                        from .grow import refuse_regating_grown

                        refuse_regating_grown(spec, rundir, [r.tag for r in requests])
                    planned = plan_evaluation(
                        spec,
                        rundir,
                        pool_ids,
                        requests,
                        split,
                        rerun=option.capevolve_rerun,
                        gate=gate,
                        screens=screens,
                        block=option.capevolve_block,
                    )
            except BaseException:
                rundir.claims.release()
                rundir.discard_if_created()  # a refused session leaves no empty run behind
                raise
        persistence = Persistence(config, spec, rundir, planned.plan, waiting_on=planned.waiting_on)
        sequential = _sequential_role(config, spec, rundir, planned) if gate.sequential else None
        role = EvaluationSession(
            spec,
            rundir,
            planned,
            gate,
            screens.refusals,
            persistence,
            explain=option.capevolve_explain,
            sequential=sequential,
        )
    plan_split, plan_block = planned.plan.split, planned.plan.block
    read = (
        role.seal.test_rollouts  # type: ignore[union-attr]
        if finalize
        else lambda: rundir.rollouts.indexed_rollouts(
            plan_split, planned.plan.tags() | {SEED_TAG}, plan_block
        )
    )
    end = SessionEnd(
        role.conclude,
        planned.best,
        settle=persistence.settle,
        interrupted=lambda: _interrupted(config, spec, planned, persistence, read, role),
    )
    progress = Progress(spec, rundir, len(planned.plan.owed_keys()), option.capevolve_progress)
    plugins: list[tuple[str, object]] = [("persistence", persistence)]
    if isinstance(role, EvaluationSession) and role.sequential is not None:
        plugins.append(("sequential", role.sequential))  # after persistence: it sees saved rollouts
    for name, plugin in (
        *plugins,
        ("session", role),
        ("end", end),
        (
            "reporter",
            CapevolveReporter(
                rundir, end, persistence.tally, progress, lambda: _resume_command(config, spec, planned, True)
            ),
        ),
        ("remote", RemoteWorkers(config, spec)),
    ):
        config.pluginmanager.register(plugin, f"capevolve-{name}")
    if getattr(option, "xmlpath", None):  # --junitxml: flat properties, a testcase per verdict
        from .junit import JunitReport

        config.pluginmanager.register(JunitReport(config, end), "capevolve-junitxml")
    return planned.plan


def _sequential_role(config: pytest.Config, spec: Spec, rundir: RunDir, planned: Planned) -> SequentialGate:
    """The sequential gate's role: every non-best tag gated against the best; the candidates
    share the round's α from the val-reuse budget equally (Bonferroni: each is decided on its
    own, as its e-process crosses), each null control gets what one candidate gets."""
    from .gating import AlphaBudget
    from .sequential_gate import SequentialGate

    plan = planned.plan
    gated = [c.tag for c in plan.candidates if c.tag != planned.best]
    siblings = [t for t in gated if t not in planned.null_tags]
    budget = AlphaBudget.read(spec, rundir, len(siblings))
    share = budget.round / max(len(siblings), 1)
    return SequentialGate(config, spec, rundir, plan, planned.best, gated, dict.fromkeys(gated, share))


def _interrupted(
    config: pytest.Config,
    spec: Spec,
    planned: Planned,
    persistence: Persistence,
    read: Callable[[], list[RolloutRecord]],
    role: EvaluationSession | FinalizeSession | None = None,
) -> Outcome:
    """After Ctrl-C: the table of what is persisted (no seal burned) and the exact command that
    resumes; every rollout that reported before the interrupt is saved. A sequential gate
    writes what it knows: a decision it reached, else "undecided" with its e-values."""
    from .._store.evidence import index_records

    persistence.rundir.claims.release()
    plan = planned.plan
    records = index_records(read(), plan.block)
    outcome = summarize(plan, records, persistence.tally, against=planned.best)
    if isinstance(role, EvaluationSession) and role.sequential is not None:
        outcome.verdicts = role.interrupted_verdicts(records)
        outcome.nulls = [v for v in outcome.verdicts if v.tag in planned.null_tags]
    judged = "the sequential gate wrote what it reached" if outcome.verdicts else "nothing was judged"
    command = _resume_command(config, spec, planned, False)
    outcome.closing += [
        (
            f"interrupted: {rollouts(len(outcome.missing))} "
            f"{'is' if len(outcome.missing) == 1 else 'are'} missing, {judged}; "
            "to resume, paying only for what is missing, run:",
            {"yellow": True},
        ),
        (f"  {command}", {"yellow": True}),
    ]
    return outcome


def _resume_command(config: pytest.Config, spec: Spec, planned: Planned, complete: bool) -> str:
    """The command typed, pinned to this run (:func:`.resume.resume_command`); ``complete``:
    without the flags that deselect rollouts, to pay every missing one."""
    from .resume import resume_command

    reran = [
        (c.tag, c.resolve(spec.project_dir))
        for c in planned.plan.candidates
        if c.tag != planned.best and c.tag not in planned.null_tags
    ]
    args = config.invocation_params.args
    return resume_command(args, planned.plan.run_id, rerun_candidates=reran, complete=complete)


def _gate_request(config: pytest.Config, split: str) -> GateRequest:
    from .._decide.rounds import MULTIPLE

    enabled = bool(config.option.capevolve_gate)
    if enabled and split != "val":
        raise pytest.UsageError(f"--capevolve-gate with --capevolve-split {split}: the gate reads only val")
    if enabled and config.option.capevolve_block:
        raise pytest.UsageError(
            f"--capevolve-gate with --capevolve-block {config.option.capevolve_block}: the gate reads "
            "block 0 only; a replicate block is evidence for `capevolve multirep`, evaluated "
            "without --capevolve-gate"
        )
    nulls = config.option.capevolve_null
    if nulls is None:
        nulls = 2 if enabled else 0
    option = config.option
    commit = option.capevolve_commit or config.getini("capevolve_commit") or "auto"
    multiple = option.capevolve_multiple or config.getini("capevolve_multiple") or "holm"
    for flag, value, allowed in (("commit", commit, COMMIT_MODES), ("multiple", multiple, MULTIPLE)):
        if value not in allowed:
            raise pytest.UsageError(f"--capevolve-{flag} must be one of {', '.join(allowed)}, got {value!r}")
    sequential = bool(option.capevolve_sequential)
    if sequential and not enabled:
        raise pytest.UsageError("--capevolve-sequential decides a gate: add --capevolve-gate")
    dist = config.getoption("dist", "no")
    if sequential and dist not in ("no", "load"):
        # only the load scheduler is replaced by the sequential window; under another
        # scheduler the workers run ahead of the decision and the stop saves nothing
        raise pytest.UsageError(
            f"--capevolve-sequential with --dist {dist}: the early stop needs --dist load (what -n uses)"
        )
    return GateRequest(enabled, nulls, bool(option.capevolve_veto_regressions), commit, multiple, sequential)


def _candidate_requests(config: pytest.Config, spec: Spec) -> list[CandidateRequest]:
    dirs = [Path(d) for d in config.option.capevolve_candidate]
    tags = list(config.option.capevolve_tag)
    if tags and len(tags) != len(dirs):
        raise pytest.UsageError(
            f"--capevolve-tag given {len(tags)} times for {len(dirs)} --capevolve-candidate; "
            "give one tag per candidate, in the same order"
        )
    requests = []
    for i, folder in enumerate(dirs):
        path = folder.resolve()
        if not path.is_dir():
            raise pytest.UsageError(f"--capevolve-candidate {folder}: no such folder")
        tag = tags[i] if tags else path.name
        if path == spec.capability_path.resolve():
            tag = tags[i] if tags else SEED_TAG
        elif tag == SEED_TAG:
            raise pytest.UsageError(
                f"--capevolve-candidate {folder}: the tag 'seed' belongs to the spec's "
                "capability_path; give this candidate another --capevolve-tag"
            )
        requests.append(CandidateRequest(tag, path))
    return requests
