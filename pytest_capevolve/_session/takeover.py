"""Rollouts a dead session left unpaid: taken over and paid by the session waiting on them.

Controller only, after the run loop. Under the run's lock a waiter claims what is neither persisted nor
claimed by a live session (two waiters never pay one rollout twice), then pays it as an item would."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .._engine.candidate_bytes import CandidateMismatch
from .._items.nodes import CONTEXT_KEY, EvalContext, measured, rollout_record, run_reserved
from .._items.plan import RolloutKey
from .._project.candidate import SEED_TAG
from .._store.sessions.claims import Claims

if TYPE_CHECKING:
    from .persistence import Persistence


def take_over(persistence: Persistence, died: list[Path]) -> tuple[int, int]:
    """Pay the rollouts the dead sessions (``died``) left unpaid, once across every waiter. Returns (paid
    here, left unpaid: budget share used up, candidate bytes changed)."""
    from .plan_build import valid_column_keys

    rundir, plan = persistence.rundir, persistence.plan
    context = persistence.config.stash[CONTEXT_KEY]
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
                if _pay(persistence, context, key):
                    paid += 1
                else:
                    unpaid += 1
        finally:
            rundir.claims.release()
        died = Claims.wait_for(live) if live else []  # a taker that died in turn: again
    plan.awaited = {k for k in plan.awaited if k not in tried}  # paid here, not reused
    return paid, unpaid


def _pay(persistence: Persistence, context: EvalContext, key: RolloutKey) -> bool:
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
    record = rollout_record(
        measured(scored, context.candidate_bytes.changed_during(key.tag, candidate_dir, stamp)), key, context
    )
    persistence.record_taken_over(record)
    return True
