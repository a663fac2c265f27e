"""The fields of a rollout record the index must give back exactly as the rollout files hold them,
for both halves of test_rundir_index."""

from __future__ import annotations

from pytest_capevolve._store.rollouts.record import RolloutRecord

OUTCOME = ("reward", "passed", "infra_error", "cost_usd", "tokens", "seed", "candidate_hash")


def outcomes(records: list[RolloutRecord]) -> dict[tuple, tuple]:
    return {r.key: tuple(getattr(r, f) for f in OUTCOME) for r in records}
