"""For decisions, the first outcome the log recorded for a rollout stands; a redraw is counted.

A rollout file is evidence, the log is the record. With an adapter that does not reproduce its
draws (an API's own randomness, ``random.random()``), deleting the files of a candidate's
failed rollouts — and of the best's passes — before each re-run made every session redraw
exactly those, and a no-op was accepted after a few rounds. The vanished file is rightly paid
again (it is missing), but the draw it brings is a second look at the same (split, tag, task,
trial): so a gate reads, for each such key, the reward of the first valid ``rollout`` event
the log holds, and its verdict records how many rollouts of each arm were paid again.

Before any of it is read, every rollout event must have been paid once by a session that
claimed it (:mod:`.paid_by`): one appended through the API from outside a session is refused.

Infra errors are missing data, not an outcome: a key whose earlier events were all infra
errors takes its first valid one, so a retry after an outage changes nothing here. But such a
key's valid outcome is a second draw, and candidate code chooses which draws end in an error (it
runs where the adapter's outside calls run): :func:`redrawn_after_errors` names those keys, and
the gate's error-imbalance check imputes them worst-case like the trials still missing.

Controller only; reads the log's rollout lines (test rollouts are finalize's, never gated).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .._project.splits import TEST_SPLIT
from . import paid_by
from .event_kinds import ROLLOUT
from .evidence import ByTag
from .rundir import RunDir

Key = tuple[str, str, str, int]  # split, tag, task id, trial


def logged_firsts(rundir: RunDir) -> tuple[dict[Key, float], dict[Key, int]]:
    """(each key's first valid logged reward, how many valid rollout events each key has)."""
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
        key = (str(event["split"]), str(event["tag"]), str(event["task_id"]), int(event["trial"]))
        first.setdefault(key, float(event["reward"]))
        paid[key] = paid.get(key, 0) + 1
    return first, paid


def redrawn_after_errors(rundir: RunDir) -> set[Key]:
    """The keys whose first logged attempt was an infra error and which a later session paid
    again: each is counted as the infra error it first was when the gate checks the arms' errors.
    (Read after :func:`logged_firsts`, whose claim tie has already refused an untrusted log.)"""
    errored: set[Key] = set()
    redrawn: set[Key] = set()
    for event in rundir.log.of_kinds(ROLLOUT):
        if event.get("split") == TEST_SPLIT:
            continue
        key = (str(event["split"]), str(event["tag"]), str(event["task_id"]), int(event["trial"]))
        if event.get("infra_error") or event.get("reward") is None:
            errored.add(key)
        elif key in errored:
            redrawn.add(key)
    return redrawn


def first_errors(rundir: RunDir, split: str) -> set[Key]:
    """The keys of ``split`` whose first logged attempt was an infra error, paid again since or
    not. The test split's seal counts each against the arm it would flatter (worst case):
    candidate code that turns its failing answers into harness-looking errors, then has them
    paid again with fresh draws, chooses which draws count."""
    seen: set[Key] = set()
    errored: set[Key] = set()
    for event in rundir.log.of_kinds(ROLLOUT):
        if event.get("split") != split:
            continue
        key = (str(event["split"]), str(event["tag"]), str(event["task_id"]), int(event["trial"]))
        if key not in seen and (event.get("infra_error") or event.get("reward") is None):
            errored.add(key)
        seen.add(key)
    return errored


def first_outcomes(rundir: RunDir, by_tag: ByTag, threshold: float) -> tuple[ByTag, dict[str, int]]:
    """``by_tag`` with each valid record's reward the log's first for its key, and, per tag,
    how many of its rollouts were paid again after a valid one (0 for an untouched arm)."""
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
    """What a verdict records: rollouts of each arm paid again, decided on their first outcome."""
    return {
        "repaid_rollouts": {tag: repaid.get(tag, 0), against: repaid.get(against, 0)},
        "repaid_rule": "a rollout paid again (its file vanished or was quarantined) is decided on "
        "the first valid outcome the log recorded for it",
    }
