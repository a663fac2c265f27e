"""Persistence and tally: every reported rollout saved exactly once, what the session paid, and what a dead
session left unpaid taken over.

Controller only. xdist replays each worker's reports here through ``pytest_runtest_logreport``, so one code
path serves both modes."""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from .. import exitcodes
from .._engine import confinement
from .._engine.budget_share import SKIP_REASON as BUDGET_SKIP
from .._engine.candidate_bytes import CandidateMismatch, gateway_count
from .._engine.judging import wrong_rescores
from .._engine.runner import Scored
from .._items.nodes import (
    CONTEXT_KEY,
    INFRA_PREFIX,
    EvalContext,
    item_name,
    measured,
    rollout_record,
    run_reserved,
)
from .._items.plan import WORKERINPUT_KEY, EvalPlan, RolloutKey
from .._project.blocks import first_trial
from .._project.candidate import SEED_TAG
from .._project.spec import Spec
from .._show.report import arm_summary
from .._store.log.event_kinds import SESSION_FINISHED, SESSION_LOAD
from .._store.readers.evidence import ByTag, Outcomes
from .._store.rollouts.index import Columns
from .._store.rollouts.record import RECORD_PROPERTY, RolloutRecord, decode_record, record_text
from .._store.rundir import RUNS_DIR, RunDir
from .._store.sessions import markers
from .._store.sessions.claims import Claims, live_sessions
from .outcome import Outcome

# a report's attribute, set before other plugins see it: the record this session persisted for it (None
# when it recorded none: not owed, or reported twice), which they read rather than what the report says
RECORDED = "capevolve_recorded"

if TYPE_CHECKING:
    from .planning import Planned

# the infra error recorded for an owed rollout whose item ran and brought no record
VANISHED = "the rollout left no record"
NOT_OWED = "not a rollout this session owes, or one it recorded already: not recorded"
RECORD_WINDOW_MIN = 16  # items a worker holds beyond its rollouts in flight: refills overlap runs


@dataclass
class Tally:
    """What this session paid and lost, as reports arrived."""

    paid: dict[str, int] = field(default_factory=dict)
    infra: list[tuple[str, str]] = field(default_factory=list)  # (nodeid, reason)
    lost: list[tuple[str, str]] = field(default_factory=list)  # items that never reported
    dead_workers: list[tuple[str, str]] = field(default_factory=list)
    over_budget: list[str] = field(default_factory=list)  # not started: a ceiling's share used up


class Persistence:
    def __init__(self, config: pytest.Config, spec: Spec, rundir: RunDir, planned: Planned) -> None:
        self.config = config
        self.spec = spec
        self.rundir = rundir
        self.plan = plan = planned.plan
        self.tally = Tally()
        self.waiting_on = list(planned.waiting_on)  # other sessions paying what this one needs
        self._session: pytest.Session | None = None
        # the load this session pays at (:mod:`.._policy.gate.verdicts`), and who else was paying
        self.concurrency = int(config.option.capevolve_concurrency or spec.concurrency)
        self.workers = gateway_count(config)
        self.others_at_start: list[dict[str, Any]] = []
        self.unwritable: OSError | None = None  # the run dir refused a write (a full disk)
        # owed rollouts no report has brought yet (taken now: a plugin editing the plan later
        # changes what is collected, not what may be recorded)
        self._unrecorded: set[Any] = set(plan.owed_keys())

    def damage_line(self) -> str | None:
        """The line saying the run dir could not be written, if so (the session then books nothing)."""
        exc = self.unwritable
        if exc is None:
            return None
        why = exc.strerror or str(exc)
        recorded = sum(self.tally.paid.values())
        return (
            f"capevolve: the run dir {self.rundir.root} could not be written ({why}): the session "
            f"stopped after recording {recorded} rollout(s) and decided nothing; make room and "
            "run the same command again to resume (what was recorded is kept)"
        )

    def settle(self) -> list[str]:
        """After the run loop: release the claim, wait for sessions paying what this one needs."""
        if self.unwritable is not None:  # nothing more is written: the session ends here
            self.rundir.claims.release()
            return []
        self.rundir.flush()
        self.rundir.claims.release()
        if not self.waiting_on:
            return []
        died = self.rundir.claims.wait_for(self.waiting_on)
        lines = [
            f"{len(self.plan.awaited)} rollouts were being paid by {len(self.waiting_on)} concurrent "
            "session(s): waited for them instead of paying again"
        ]
        if died:  # their claims are void: what they left unpaid is taken over and paid here
            paid, unpaid = self._take_over(died)
            left = f"; {unpaid} could not be paid here and are missing below" if unpaid else ""
            lines.append(
                f"{len(died)} of those sessions died before they were done: this session took "
                f"their claims over and paid the {paid} rollout(s) they left unpaid (each once){left}"
            )
        return lines

    def _take_over(self, died: list[Path]) -> tuple[int, int]:
        """Pay the rollouts the dead sessions (``died``) left unpaid, once across every waiter: under the
        run's lock a waiter claims what is neither persisted nor claimed by a live session. Returns (paid
        here, left unpaid: budget share used up, candidate bytes changed)."""
        from .plan_build import valid_column_keys

        rundir, plan = self.rundir, self.plan
        context = self.config.stash[CONTEXT_KEY]
        tags = plan.tags() | {SEED_TAG}
        tried: set[RolloutKey] = set()  # paid once here, whatever came of it: never again
        paid = unpaid = 0
        while died:
            with rundir.lock():
                done = valid_column_keys(rundir.rollouts.indexed_columns(plan.split, tags, plan.block))
                claimed = rundir.claims.others()  # deletes the void claims: their rollouts are no one's
                wanted = [k for k in sorted(plan.awaited) if k not in done and k not in tried]
                ours = [RolloutKey(*k) for k in wanted if k not in claimed]
                rundir.claims.take(ours)
            live = sorted({claimed[k] for k in wanted if k in claimed})
            try:
                for key in ours:
                    tried.add(key)
                    if self._pay(context, key):
                        paid += 1
                    else:
                        unpaid += 1
            finally:
                rundir.claims.release()
            died = Claims.wait_for(live) if live else []  # a taker that died in turn: again
        plan.awaited = {k for k in plan.awaited if k not in tried}  # paid here, not reused
        return paid, unpaid

    def _pay(self, context: EvalContext, key: RolloutKey) -> bool:
        """One rollout, as :meth:`.._items.nodes.RolloutItem.runtest` pays it; persisted at once.
        False when it is not paid (its candidate's bytes changed, the budget share is used up)."""
        try:
            candidate_dir, stamp = context.candidate_dir(key.tag)
        except CandidateMismatch:
            return False
        name = f"takeover::{key.split}::{key.task_id}[{key.tag}-t{key.trial}]"
        if context.budget.reserve(name, key.tag, wait=False) is not None:
            return False
        scored = run_reserved(context, key, name, candidate_dir)
        changed = context.candidate_bytes.changed_during(key.tag, candidate_dir, stamp)
        record = rollout_record(measured(scored, changed), key, context)
        record = self._persist(record, record.dumps())
        if record.infra_error:
            self.tally.infra.append((f"{record.split}::{record.task_id}[{record.tag}]", record.infra_error))
        return True

    @pytest.hookimpl(optionalhook=True, trylast=True)  # the sequential gate's smaller window first
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Under ``--dist load``: no worker holds more than a window of unrecorded rollouts (enough to keep
        its concurrency in flight while the refill travels back), so a controller killed at any moment loses
        at most that many per worker (xdist's own lost 2,267 of 22,267)."""
        if config.getvalue("dist") != "load":
            return None
        from .perf.window import window_scheduler

        return window_scheduler(config, log, max(RECORD_WINDOW_MIN, 4 * self.concurrency), lead_limit=False)

    def stop_workers(self) -> None:
        if self.plan.live:
            markers.remove(markers.live_path(self.rundir.root, self.plan.live))

    # Ctrl-C: before xdist's teardown waits on workers still paying; an internal error (a full disk,
    # say): what workers pay now could not be recorded
    pytest_keyboard_interrupt = pytest_internalerror = stop_workers

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.stop_workers()
        try:
            if self.unwritable is None:
                self.rundir.flush()  # a view of the log: skipping it (a crash) loses nothing
                # after the session's last append: what the next resume with nothing owed reads
                self.rundir.rollouts.seal_summary()
        except OSError as exc:  # a full disk at the very end: the views wait for the next session
            self.unwritable = exc
        finally:
            self.rundir.claims.release()  # an interrupted session lets go too
            self.rundir.log.close_log()
            # the index's SQLite files and the run's lock, not left to the collector: in-process
            # sessions (pytester) leaked them; each reopens on demand if a later hook needs it
            self.rundir.rollouts.index.close()
            self.rundir.lock.close()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = json.dumps(self.plan.to_wire())

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._session = session
        self.others_at_start = live_sessions(self.spec.project_dir / RUNS_DIR, self.rundir.claims.path)
        owed = Counter(k.tag for k in self.plan.owed_keys())
        if owed:  # the load its rollouts are paid at: what a later gate compares its own with
            from .._policy.gate.verdicts import load_event  # here: a resume with nothing owed loads no gate

            self.rundir.log.append_event(SESSION_LOAD, **load_event(self.concurrency, self.workers, owed))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Iterator[None]:
        """Persist each rollout exactly once as its report arrives, before other plugins see it; after them
        a passed report drops its record (pytest keeps every report), a failed one keeps it for the
        summary."""
        text = record_text(report)
        if text is None and ran_without_record(report) and self.unwritable is None:
            stands_in = self._record_vanished(report)
            if stands_in is not None:  # recorded in the item's place; its report shown as it came
                self._owes(stands_in)
                try:
                    setattr(report, RECORDED, self._persist(stands_in, stands_in.dumps()))
                    self.tally.infra.append((report.nodeid, str(stands_in.infra_error)))
                except OSError as exc:  # a full disk: stop, as for any record
                    self.unwritable = exc
                    self.stop_workers()
                    self._stop("capevolve: the run dir could not be written")
        if text is None:
            if report.skipped and report.when == "call" and BUDGET_SKIP in str(report.longrepr):
                self.tally.over_budget.append(str(report.longrepr).rpartition(BUDGET_SKIP)[2])
            if report.failed:
                reason = str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "?"
                self.tally.lost.append((report.nodeid, reason))
            return (yield)
        if report.when != "call":  # the teardown report carries the call's record again
            return (yield)
        record = decode_record(text, report)
        setattr(report, RECORDED, None)
        if self.unwritable is not None:  # stopped: what still arrives cannot be recorded
            return (yield)
        if not self._owes(record):  # an item the plan does not hold, or one reported twice
            self.tally.lost.append((report.nodeid, NOT_OWED))
            return (yield)
        try:
            record = self._persist(record, text)
            setattr(report, RECORDED, record)
        except OSError as exc:  # a full disk, a read-only run dir: stop, once, in one line
            self.unwritable = exc
            self.stop_workers()
            self._stop("capevolve: the run dir could not be written")
            return (yield)
        if record.infra_error:
            self.tally.infra.append((report.nodeid, record.infra_error))
        result = yield
        if report.passed:
            report.user_properties = [p for p in report.user_properties if p[0] != RECORD_PROPERTY]
        return result

    def _record_vanished(self, report: pytest.TestReport) -> RolloutRecord | None:
        """An owed rollout whose item ran and brought no record: an infra error in its place (missing data),
        so the gate weighs it as the error it stands for and a later session's draw of it as a redraw after
        one (:func:`.._store.readers.evidence.redrawn_after_errors`), never a cell passed over and drawn
        afresh. None for a report of no owed, unrecorded rollout."""
        key = vanished_key(report.nodeid, self._item_keys)
        if key is None or key not in self._unrecorded:
            return None
        why = str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "no reason given"
        said = f"{VANISHED}: its item {report.outcome} in {report.when} ({why})"[:500]
        return rollout_record(Scored(rollout=None, infra_error=said), key, self.config.stash[CONTEXT_KEY])

    @functools.cached_property
    def _item_keys(self) -> dict[str, RolloutKey]:
        """``split::item name`` → key, for every rollout this session owes (read on the first need)."""
        return {f"{k.split}::{item_name(self.plan, k)}": k for k in self._unrecorded}

    def _owes(self, record: RolloutRecord) -> bool:
        """Whether ``record`` is owed and not yet recorded: the backstop behind :mod:`.plan_check` (under
        xdist the controller sees only node ids)."""
        key = (record.split, record.task_id, record.tag, record.trial)
        owed = key in self._unrecorded
        self._unrecorded.discard(key)
        return owed

    def _persist(self, record: RolloutRecord, text: str | None) -> RolloutRecord:
        wrong = wrong_rescores(record.judge, record.valid, self.spec.judge_rescores)
        if wrong is not None:  # measured, but not as the run measures: missing data, never a reward
            record = replace(record, reward=None, passed=None, judge=None, infra_error=wrong)
            text = None
        self.rundir.rollouts.record_rollout(record, text)
        confinement.note(record.confinement)  # what this session's verdicts say of candidate code
        self.tally.paid[record.tag] = self.tally.paid.get(record.tag, 0) + 1
        cap = self.spec.max_usd
        if cap is not None and (usd := self.rundir.state.read_state()["spent"]["usd"]) > cap:
            # a backstop: each process's budget share already keeps its rollouts under the cap
            # (:mod:`.._engine.budget_share`); workers start nothing more once it is crossed
            self._stop(f"budget max_usd={cap} spent ({usd:.4f} USD)")
            self.stop_workers()
        return record

    def _stop(self, reason: str) -> None:
        if self._session is not None:
            self._session.shouldstop = reason
        dsession = self.config.pluginmanager.getplugin("dsession")
        if dsession is not None:
            dsession.shouldstop = reason

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        if error:  # xdist gives the worker's whole traceback: its last line says what happened
            said = [line for line in str(error).splitlines() if line.strip()]
            self.tally.dead_workers.append((node.gateway.id, said[-1].strip() if said else str(error)))


def ran_without_record(report: pytest.TestReport) -> bool:
    """A rollout item's report that says it ran (its call, or a setup that failed). Not a skip (a budget's
    share, a sequential stop, a stopped controller), not a refusal before paying (an ``InfraError``
    with no record: a worker's other tasks, a candidate's changed bytes), and not xdist's report of a
    worker that crashed (``when`` ``"???"``: the crash-resume path, whose rollouts the next session
    pays as missing, as before)."""
    if report.skipped or str(report.longrepr).startswith(INFRA_PREFIX):
        return False
    return report.when == "call" or (report.when == "setup" and report.failed)


def vanished_key(nodeid: str, keys: dict[str, RolloutKey]) -> RolloutKey | None:
    """The owed rollout ``nodeid`` names (``keys``: ``split::item name`` → key), or None; a task id may
    hold ``::``, so every tail of the node id is tried, the longest first."""
    parts = nodeid.split("::")
    return next((keys[t] for i in range(1, len(parts)) if (t := "::".join(parts[i:])) in keys), None)


def summarize(plan: EvalPlan, outcomes: ByTag | Outcomes, tally: Tally, *, against: str) -> Outcome:
    """The per-tag rows and the planned rollouts still missing, from what is persisted (a resume's 60,000
    read as columns); the exit code says whether the session produced everything it owed."""
    columns = outcomes if isinstance(outcomes, Outcomes) else Outcomes.of_arms(outcomes)
    # the two as one set's members, without building that set (awaited is disjoint from persisted when
    # planned: its difference is then itself, and empty on a resume)
    reused = chain(plan.persisted, plan.awaited - plan.persisted if plan.awaited else ())
    reused_by_tag = Counter(map(itemgetter(2), reused))
    arrays = {c.tag: columns.arm_arrays(c.tag, plan.task_ids, plan.num_trials) for c in plan.candidates}
    rows = [
        arm_summary(
            arrays[c.tag],
            tag=c.tag,
            split=plan.split,
            tasks=len(plan.task_ids),
            num_trials=plan.num_trials,
            paid=tally.paid.get(c.tag, 0),
            reused=reused_by_tag.get(c.tag, 0),
        )
        for c in plan.candidates
    ]
    keys = plan.all_keys()
    measured = sum(int(np.count_nonzero(~np.isnan(rewards))) for rewards, *_ in arrays.values())
    if measured == len(keys) == len(set(plan.task_ids)) * plan.num_trials * len(plan.candidates):
        missing = []  # every planned cell holds a valid rollout (no task listed twice)
    else:
        valid = {
            (tag, task_id, k)
            for tag, task_id, k, reward, infra in zip(
                columns.tag, columns.task_id, columns.trial, columns.reward, columns.infra_error, strict=True
            )
            if infra is None and reward is not None
        }
        missing = [k for k in keys if (k.tag, k.task_id, k.trial - plan.first_trial) not in valid]
    failed = missing or tally.dead_workers
    return Outcome(
        rows, missing, against=against, exit_code=exitcodes.INFRA_FAILURE if failed else exitcodes.OK
    )


def outcomes_of_columns(columns: Columns, block: int) -> Outcomes:
    """The index's rows of one replicate block as :class:`~..decide.evidence.Outcomes`."""
    trials = columns["trial"]
    if block:
        offset = first_trial(block)
        trials = [k - offset for k in trials]
    return Outcomes(
        columns["tag"],
        columns["task_id"],
        trials,
        columns["reward"],
        columns["passed"],
        columns["infra_error"],
        columns["cost_usd"],
    )


def record_finish(
    spec: Spec, rundir: RunDir, plan: EvalPlan, tally: Tally, outcome: Outcome, by_tag: ByTag
) -> None:
    """Log the session's end and refresh report.md and dashboard.html (views)."""
    rundir.log.append_event(
        SESSION_FINISHED,
        paid=sum(tally.paid.values()),
        missing=len(outcome.missing),
        dead_workers=[w for w, _ in tally.dead_workers],
        exit_code=outcome.exit_code,
    )
    # report.md and dashboard.html show block 0; a replicate block's session lets them read it.
    # Imported here: drawing them needs scipy, and a session that changed nothing draws nothing
    from .._show.views import refresh

    outcome.report_error = refresh(spec, rundir, {plan.split: by_tag} if plan.block == 0 else {})
