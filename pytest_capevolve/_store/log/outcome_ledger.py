"""What the log says each train and val rollout came out as: the truth every evidence read is held to.

The index and rollout files can be edited by anyone with a shell, or by a candidate's code during
its own gate; the log is the record, and a differing file is quarantined — never used. A leaving
session logs the digest of every outcome so the next process can check the index in one pass."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping
from itertools import islice
from typing import Any

from ..._project.splits import TEST_SPLIT
from ..files import RunDirError
from .event_kinds import OUTCOMES_CHECKED, ROLLOUT, ROLLOUT_QUARANTINED, ROLLOUT_VANISHED
from .events import EventLog
from .paid_by import moved_files

_DIGEST_BLOCK = 4096  # outcomes whose repr is hashed at a time
Key = tuple[str, str, str, int]  # split, tag, task id, trial
Outcome = tuple[float | None, str | None, float]  # reward, infra error, cost


def outcome(reward: Any, infra_error: Any, cost_usd: Any) -> Outcome:
    """The outcome as compared: numbers as floats (an index REAL and a JSON number compare equal)."""
    return (None if reward is None else float(reward), infra_error or None, float(cost_usd or 0.0))


def digest_of(items: Iterable[tuple[Key, Outcome]]) -> str:
    """sha256 of the outcomes in key order: the index's rows and the ledger hash alike iff they agree."""
    digest = hashlib.sha256(b"[")
    # the list's repr a block of items at a time, never its whole text (5 MB at 60,000)
    rest, separator = iter(items), b""
    while block := [repr(item) for item in islice(rest, _DIGEST_BLOCK)]:
        digest.update(separator + ", ".join(block).encode("utf-8"))
        separator = b", "
    digest.update(b"]")
    return digest.hexdigest()


def rollout_key(event: Mapping[str, Any]) -> Key:
    return (str(event["split"]), str(event["tag"]), str(event["task_id"]), int(event["trial"]))


def rollout_view(event: dict[str, Any]) -> Any:
    kind = event.get("kind")
    if kind == ROLLOUT:
        if event.get("split") == TEST_SPLIT:
            return None
        logged = outcome(event.get("reward"), event.get("infra_error"), event.get("cost_usd"))
        return ("set", rollout_key(event), logged)
    return ("drop", moved_files(event)) if kind in (ROLLOUT_QUARANTINED, ROLLOUT_VANISHED) else None


class _Changes:
    """A ``view`` applying each rollout line to ``truth`` (repeated names and outcomes held once)."""

    def __init__(self, truth: dict[Key, Outcome], file_of: Callable[[str, str, str, int], str]) -> None:
        self.truth = truth
        self.file_of = file_of
        self.changed = False
        self._by_file: dict[str, Key] | None = None  # made at the first drop, kept current after
        self._names: dict[str, str] = {}
        self._outcomes: dict[Outcome, Outcome] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        change = rollout_view(event)
        if change is None:
            return
        self.changed = True
        if change[0] == "set":
            split, tag, task_id, trial = change[1]
            name = self._names.setdefault
            key: Key = (name(split, split), name(tag, tag), name(task_id, task_id), trial)
            self.truth[key] = self._shared(change[2])
            if self._by_file is not None:
                self._by_file[self.file_of(key[0], key[2], key[1], key[3])] = key
            return
        if self._by_file is None:  # a quarantine or a vanish names files: map them once
            self._by_file = {self.file_of(k[0], k[2], k[1], k[3]): k for k in self.truth}
        for file in change[1]:
            dropped = self._by_file.pop(str(file), None)
            if dropped is not None:
                self.truth.pop(dropped, None)

    def _shared(self, value: Outcome) -> Outcome:
        reward = value[0]
        if reward == 0.0 and math.copysign(1.0, reward) < 0:  # -0.0 == 0.0, but it is its own repr
            return value
        return self._outcomes.setdefault(value, value)


class OutcomeLedger:
    """The log's train and val rollout outcomes, built on first use and caught up on each."""

    def __init__(self, log: EventLog, file_of: Callable[[str, str, str, int], str]) -> None:
        self.log = log
        self.file_of = file_of
        self._truth: dict[Key, Outcome] | None = None
        self._position = (0, 0)
        # the index's rows the truth was built from, while it is exactly them: their digest was the
        # linked checkpoint's, and no rollout has been logged, moved or gone since
        self._mirrored: list[tuple[Any, ...]] | None = None
        self._unchecked = False  # outcomes learnt from rollout lines since the last checkpoint

    def current(self, index_rows: Callable[[], list[tuple[Any, ...]]]) -> dict[Key, Outcome]:
        """The truth, current with the log (``index_rows``: read only to check a checkpoint)."""
        if self._truth is None:
            self._build(index_rows)
        else:
            self._catch_up()
        assert self._truth is not None
        return self._truth

    def replayed(self, events: Iterable[dict[str, Any]]) -> dict[Key, Outcome]:
        """The outcomes ``events`` (the whole log, as a reader parsed it) make, no checkpoint trusted:
        what ``capevolve verify`` holds the sealed summary's rows to (a summary and its chained line
        can be forged together)."""
        apply = _Changes({}, self.file_of)
        for event in events:
            apply(event)
        return apply.truth

    def mirrors(self, truth: dict[Key, Outcome], index_rows: list[tuple[Any, ...]]) -> bool:
        """Whether ``truth`` (as :meth:`current` returned it) is ``index_rows`` (that very list, as
        the index returned it) and nothing else: each row's outcome is then its key's in the truth,
        so a check of the rows against it need not compare them one by one."""
        return truth is self._truth and self._mirrored is not None and index_rows is self._mirrored

    def _build(self, index_rows: Callable[[], list[tuple[Any, ...]]]) -> None:
        checkpoints = self.log.of_kinds(OUTCOMES_CHECKED)
        if checkpoints and self.log.linked(checkpoints[-1]):  # in the chain where it says it is
            last = checkpoints[-1]
            at = (int(last["offset"]), int(last["upto"]))
            tail = self.log.events_after(*at, rollout_view)
            if tail is not None and not tail[0]:  # no rollout logged, moved or gone since
                listed = index_rows()
                rows = [((r[0], r[1], r[2], int(r[3])), outcome(r[4], r[6], r[7])) for r in listed]
                if digest_of(rows) == last["digest"]:
                    self._truth = dict(rows)
                    self._position = tail[1], tail[2]
                    self._mirrored = listed
                    return
        self._mirrored = None
        self._truth = {}
        self._position = (0, 0)
        self._catch_up()

    def _catch_up(self) -> None:
        assert self._truth is not None
        start = self._position
        apply = _Changes(self._truth, self.file_of)
        # each change is applied as its line is read, never held in a list (60,000 of them at a
        # fresh session's end); a log that does not continue from here discards the truth below
        tail = self.log.events_after(*start, apply)
        if tail is None:
            self._truth, self._position = {}, (0, 0)  # the log was repaired or replaced: anew
            self._mirrored = None
            if start == (0, 0):
                raise RunDirError(
                    f"{self.log.events_path}: a line is not an event, so no rollout can be checked "
                    "against it; run `capevolve verify`"
                )
            self._catch_up()
            return
        _, offset, seq = tail
        if apply.changed:
            self._mirrored = None
        self._unchecked = self._unchecked or apply.changed
        self._position = (offset, seq)

    def checkpoint(self, also: Callable[[int, int], dict[str, Any]]) -> bool:
        """As a session leaves: log the outcomes' digest if rollouts were logged since; whether it did."""
        if self._truth is None:
            return False
        self._catch_up()
        if not self._unchecked:  # nothing learnt from rollout lines: the last digest still holds
            return False
        offset, upto = self._position
        self.log.append_event(
            OUTCOMES_CHECKED,
            offset=offset,
            upto=upto,
            rollouts=len(self._truth),
            digest=digest_of(sorted(self._truth.items())),
            **also(offset, upto),
        )
        self._unchecked = False
        return True
