"""Issue 37: each rollout event a decision reads was paid once by a session's logged claim
(:mod:`pytest_capevolve._store.log.paid_by`), found in one pass over the log's events."""

from __future__ import annotations

from pytest_capevolve._store.log.event_kinds import CLAIMED
from pytest_capevolve._store.log.paid_by import claimed_keys, untrusted


def _rollout(seq: int, task: str, *, claim: str | None = "c1", reward: float | None = 1.0) -> dict:
    event = {"kind": "rollout", "seq": seq, "split": "val", "task_id": task, "tag": "cand", "trial": 0}
    return {
        **event,
        "reward": reward,
        "infra_error": None if reward is not None else "API down",
        "claim": claim,
    }


CLAIM = {"kind": CLAIMED, "seq": 1, "claim": "c1", "keys": claimed_keys([("val", "t1", "cand", 0)])}


def test_a_rollout_its_sessions_claim_holds_is_trusted_and_a_log_older_than_claims_too() -> None:
    assert untrusted([CLAIM, _rollout(2, "t1")]) == []
    assert untrusted([_rollout(1, "t1", claim=None), _rollout(2, "t2", claim=None)]) == []  # no claim yet


def test_a_rollout_no_claim_holds_is_named() -> None:
    for event in (_rollout(2, "t2"), _rollout(2, "t1", claim=None), _rollout(2, "t1", claim="other")):
        (line,) = untrusted([CLAIM, event])
        assert line.startswith("rollout event seq 2 (val") and "no session's claim holds it" in line


def test_a_key_paid_twice_is_named_unless_its_file_was_moved_between_or_the_first_was_missing() -> None:
    (line,) = untrusted([CLAIM, _rollout(2, "t1"), _rollout(3, "t1")])
    assert (
        line
        == "val t1 cand t0: paid 2 times (rollout events seq 2, 3) with no quarantine or vanish of its file between"
    )
    vanished = {"kind": "rollout_vanished", "seq": 3, "files": ["rollouts/val/t1__cand__t0.json"]}
    assert untrusted([CLAIM, _rollout(2, "t1"), vanished, _rollout(4, "t1")]) == []
    assert untrusted([CLAIM, _rollout(2, "t1", reward=None), _rollout(3, "t1")]) == []  # an outage, then paid
