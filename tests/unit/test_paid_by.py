"""Issue 37: each rollout event a decision reads was paid once by a session's logged claim
(:mod:`pytest_capevolve._store.log.paid_by`), found in one pass over the log's events."""

from __future__ import annotations

import pytest

from pytest_capevolve._store.log import paid_by
from pytest_capevolve._store.log.event_kinds import CLAIMED
from pytest_capevolve._store.log.paid_by import Key, claimed_keys


def _file(key: Key) -> str:
    """A rollout's file as the run names it (any name one key has alone: the run's is a MAC)."""
    return "rollouts/{}/{}__{}-{}.json".format(*key)


def untrusted(events: list[dict]) -> list[str]:
    return paid_by.untrusted(events, _file)


def paid_twice(events: list[dict]) -> list[str]:
    return paid_by.paid_twice(events, _file)


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
    vanished = {"kind": "rollout_vanished", "seq": 3, "files": [_file(("val", "t1", "cand", 0))]}
    assert untrusted([CLAIM, _rollout(2, "t1"), vanished, _rollout(4, "t1")]) == []
    assert untrusted([CLAIM, _rollout(2, "t1", reward=None), _rollout(3, "t1")]) == []  # an outage, then paid


@pytest.mark.attack(
    "record",
    attack=(
        "a paid key logged again as a pass, the forger copying the paying session's claim id, its key "
        'spelt otherwise (trial `"0"` or `0.0`, the task id a number): the same rollout to the '
        "outcome ledger (`rollout_key`), another key to a rule that compared values as written"
    ),
    outcome=(
        "refused before any decision and named by `verify`: the rule of a key paid twice reads each key as "
        "the outcome ledger does, so a key spelt otherwise is paid twice (or, where claims are logged, held "
        "by no claim) — in a log older than claims too"
    ),
)
def test_a_second_payment_spelt_otherwise_is_refused_as_unclaimed_or_paid_twice() -> None:
    for claim, head in (("c1", [CLAIM]), (None, [])):  # a log with claims, and one older than claims
        first = _rollout(2, "t1", claim=claim, reward=0.0)
        for spelt in ({"trial": "0"}, {"trial": " 0"}, {"trial": 0.0}, {"task_id": 1}):
            again = {**_rollout(3, "t1", claim=claim), **spelt}
            events = [*head, first, again]
            problems = untrusted(events)
            if claim is None and "task_id" in spelt:
                assert problems == []  # task 1 is not task t1, and no claim check runs yet
                continue
            assert len(problems) == 1 and (
                "no session's claim holds it" in problems[0] or "paid 2 times" in problems[0]
            ), (spelt, problems)
            if "paid 2 times" in problems[0]:
                assert paid_twice(events) == problems  # verify says what the decision refuses


def test_a_claim_whose_keys_cannot_be_read_is_named_not_a_traceback() -> None:
    for keys in ({"val/cand/zero": ["t1"]}, ["val/cand/0"], {"val/cand/0": 7}):
        problems = untrusted([{**CLAIM, "keys": keys}, _rollout(2, "t1")])
        assert any("claimed event seq 1: keys unreadable" in line for line in problems), (keys, problems)
