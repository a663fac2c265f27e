"""For decisions, the first outcome the log recorded for a rollout stands; a redraw is counted.

Deleting the files of a candidate's failures made a non-reproducing adapter redraw exactly those,
and a no-op was accepted after a few rounds. A redraw after an infra error is a draw candidate code
can choose, so :func:`redrawn_after_errors` names those keys for the error check's worst case."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..._project.splits import TEST_SPLIT
from ..log import paid_by
from ..log.event_kinds import ROLLOUT
from ..log.outcome_ledger import Key, rollout_key
from ..rundir import RunDir
from .evidence import ByTag


def logged_firsts(rundir: RunDir) -> tuple[dict[Key, float], dict[Key, int]]:
    first: dict[Key, float] = {}
    paid: dict[Key, int] = {}
    events = rundir.log.of_kinds(*paid_by.KINDS)
    # a rollout no session's claim paid, or a key paid twice, is refused before it is read
    paid_by.refuse_untrusted(events, rundir.run_id)
    for event in events:
        if event.get("kind") != ROLLOUT:
            continue
        if event.get("split") == TEST_SPLIT or event.get("infra_error") or event.get("reward") is None:
            continue
        key = rollout_key(event)
        first.setdefault(key, float(event["reward"]))
        paid[key] = paid.get(key, 0) + 1
    return first, paid


def redrawn_after_errors(rundir: RunDir) -> set[Key]:
    """The keys whose first logged attempt was an infra error and were paid again."""
    errored: set[Key] = set()
    redrawn: set[Key] = set()
    for event in rundir.log.of_kinds(ROLLOUT):
        if event.get("split") == TEST_SPLIT:
            continue
        key = rollout_key(event)
        if event.get("infra_error") or event.get("reward") is None:
            errored.add(key)
        elif key in errored:
            redrawn.add(key)
    return redrawn


def first_errors(rundir: RunDir, split: str) -> set[Key]:
    """The keys of ``split`` whose first logged attempt was an infra error, paid again or not."""
    seen: set[Key] = set()
    errored: set[Key] = set()
    for event in rundir.log.of_kinds(ROLLOUT):
        if event.get("split") != split:
            continue
        key = rollout_key(event)
        if key not in seen and (event.get("infra_error") or event.get("reward") is None):
            errored.add(key)
        seen.add(key)
    return errored


def first_outcomes(rundir: RunDir, by_tag: ByTag, threshold: float) -> tuple[ByTag, dict[str, int]]:
    """``by_tag`` with each valid reward the log's first for its key, and per tag how many were paid again."""
    first, paid = logged_firsts(rundir)
    held: ByTag = {}
    repaid: dict[str, int] = {}
    for tag, arm in by_tag.items():
        repaid[tag] = 0
        held[tag] = {}
        for cell, record in arm.items():
            key = (record.split, record.tag, record.task_id, record.trial)
            repaid[tag] += max(0, paid.get(key, 0) - 1)
            reward = first.get(key)
            if record.valid and reward is not None and reward != record.reward:
                record = replace(record, reward=reward, passed=reward >= threshold)
            held[tag][cell] = record
    return held, repaid


def repaid_details(repaid: dict[str, int], tag: str, against: str) -> dict[str, Any]:
    return {
        "repaid_rollouts": {tag: repaid.get(tag, 0), against: repaid.get(against, 0)},
        "repaid_rule": "a rollout paid again (its file vanished or was quarantined) is decided on "
        "the first valid outcome the log recorded for it",
    }
