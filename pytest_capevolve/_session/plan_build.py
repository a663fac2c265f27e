"""One session's plan built: the rollouts it owes, checked against the spec's ceilings, logged, claimed.

Controller only, while planning: owed is what is neither persisted valid nor claimed by another live
session."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from itertools import compress, repeat
from operator import is_

from .._engine.budget_share import Headroom
from .._items.plan import EvalPlan, PlannedCandidate
from .._policy.budget.optimizer_spend import unbooked_usd
from .._policy.stop.afford import Ceilings, afford
from .._policy.stop.stop_condition import parse as parse_stop_condition
from .._project.spec import Spec
from .._project.splits import TEST_SPLIT
from .._store.log.event_kinds import Kind, Planned
from .._store.rollouts.index import Columns
from .._store.rollouts.record import RolloutRecord
from .._store.rundir import RunDir
from ..exitcodes import CapevolveError

# One session's plan lives in memory and travels to every worker: a million rollouts is ~10x
# any real evaluation, and far below what would exhaust memory (num_trials: 1e9 would not).
MAX_PLAN_ROLLOUTS = 1_000_000


def build_plan(
    spec: Spec,
    rundir: RunDir,
    split: str,
    task_ids: list[str],
    planned: list[PlannedCandidate],
    done: Iterable[Key],
    event: Kind[Planned],
    *,
    decisions: int = 0,
    claimed: Mapping[tuple[str, str, str, int], object] | None = None,
    block: int = 0,
    num_trials: int | None = None,
    **fields: object,
) -> EvalPlan:
    """The plan over ``planned``, owing every rollout neither ``done`` (persisted valid) nor ``claimed`` by
    another live session; checked against the budget (claims count as spent), logged as ``event``, claimed."""
    tags = {c.tag for c in planned}
    trials = spec.num_trials if num_trials is None else num_trials
    size = len(task_ids) * trials * len(planned)
    if size > MAX_PLAN_ROLLOUTS:
        raise CapevolveError(
            f"{spec.path}: {len(task_ids)} {split} tasks × {trials} trials × {len(planned)} "
            f"candidate(s) = {size} rollouts, more than one session plans ({MAX_PLAN_ROLLOUTS}); "
            "lower num_trials or evaluate fewer candidates per session"
        )
    claimed = claimed or {}
    plan = EvalPlan(
        run_id=rundir.run_id,
        split=split,
        task_ids=task_ids,
        num_trials=trials,
        base_seed=spec.base_seed,
        candidates=planned,
        block=block,
    )
    keys = plan.all_keys()
    wanted = set(keys)  # RolloutKeys: tuples, equal to the plain keys
    # only this plan's keys: a best grown to more trials reuses num_trials of them here, not all
    plan.persisted = wanted.intersection(done)
    plan.awaited = wanted.intersection(claimed) - plan.persisted
    if len(plan.persisted) + len(plan.awaited) == len(wanted):  # two disjoint subsets of it: all of it
        plan.owes_nothing()
    owed = len(plan.owed_keys())
    headroom = check_ceilings(
        spec, rundir, owed, decisions=decisions, pending=len(claimed), finalizing=split == TEST_SPLIT
    )
    if headroom.usd is not None:  # the dearest rollout of each tag: what its next one reserves
        headroom = replace(headroom, cost_by_tag=dearest_by_tag(rundir, split, tags))
    plan.budget = headroom.to_wire() if headroom.usd is not None else None
    if plan.awaited:
        fields["awaited"] = len(plan.awaited)
    if block:
        fields["block"] = block
    rundir.log.append_event(
        event, split=split, tags=sorted(tags), owed=owed, reused=len(keys) - owed, **fields
    )
    # what it owes is this session's to pay: no other planner pays it again, and each rollout event
    # is tied to this session (:mod:`.._store.log.paid_by`); a finalize's seal keeps other finalizes out
    rundir.claims.take(plan.owed_keys())
    return plan


Key = tuple[str, str, str, int]  # (split, task_id, tag, trial)


def valid_keys(records: Iterable[RolloutRecord]) -> set[Key]:
    """The keys of the records that are not infra errors (an infra error is owed again)."""
    return {r.key for r in records if r.infra_error is None}


def valid_column_keys(columns: Columns) -> set[Key]:
    """:func:`valid_keys` of the index's rows as columns (no record or loop per row)."""
    keys = zip(columns["split"], columns["task_id"], columns["tag"], columns["trial"], strict=True)
    return set(compress(keys, map(is_, columns["infra_error"], repeat(None))))


def check_ceilings(
    spec: Spec, rundir: RunDir, owed: int, *, decisions: int, pending: int = 0, finalizing: bool = False
) -> Headroom:
    """Refuse, before anything is paid, a plan that would cross a ceiling (the spec's, tightened by the
    stop condition), with the arithmetic: rollouts against ``max_metric_calls``, their $ against
    ``max_usd``, and for a gate its decisions and stall. ``pending`` rollouts other sessions pay count too."""
    state = rundir.state.read_state()
    spent = state["spent"]
    ceilings = Ceilings.from_spec(spec, parse_stop_condition(spec.stop_condition))
    if not decisions:  # measuring is not deciding: only the money and rollout ceilings apply
        ceilings = replace(ceilings, max_iterations=None, stall=None)
    # the optimizer's spend booked, and what a hill-climb proposer reported for a round still
    # being gated (booked with its decision): spent either way, so the shares never count it free
    optimizer_usd = float(spent.get("optimizer_usd", 0.0)) + unbooked_usd(rundir)
    verdict = afford(
        owed + pending,
        rollouts_spent=int(spent["metric_calls"]),
        runner_usd_spent=float(spent["usd"]),
        optimizer_usd_spent=optimizer_usd,
        ceilings=ceilings,
        decisions_needed=decisions,
        iterations=int(state["iterations"]),
        stall=int(state["stall"]),
    )
    if verdict.blockers:
        crossed = "; ".join(b["message"] for b in verdict.blockers)
        raise CapevolveError(
            f"{spec.path}: this session would cross a ceiling before paying anything: {crossed}. "
            + (
                "Scoring the test split is paid like any session: raise the ceiling in the spec "
                "(ceilings are not locked with the run), then finalize again"
                if finalizing
                else "Raise the ceiling, evaluate fewer candidates or trials, or finalize"
            )
        )
    # what max_usd leaves, for the processes' shares (:mod:`.._engine.budget_share`); the
    # rollouts owed are known, so max_metric_calls is already exact here
    usd_spent = float(spent["usd"]) + optimizer_usd
    return Headroom(usd=None if ceilings.max_usd is None else float(ceilings.max_usd) - usd_spent)


def dearest_by_tag(rundir: RunDir, split: str, tags: Iterable[str]) -> dict[str, float]:
    """The dearest single rollout of each tag (the split's index); for test, val's (test is read only
    through the seal)."""
    split = "val" if split == TEST_SPLIT else split
    columns = rundir.rollouts.indexed_columns(split, set(tags), None)
    dearest: dict[str, float] = {}
    for tag, cost in zip(columns["tag"], columns["cost_usd"], strict=True):
        dearest[tag] = max(float(cost or 0.0), dearest.get(tag, 0.0))
    return dearest
