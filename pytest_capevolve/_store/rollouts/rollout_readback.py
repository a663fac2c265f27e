"""A rollout file read back, held to the log; a damaged, edited or planted file is quarantined:
moved aside, never deleted, logged, and counted as missing."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..._project.splits import TEST_SPLIT
from ..files import RunDirError, read_plain_bytes
from ..log import paid_by
from ..log.event_chain import verified_events, verify_events
from ..log.event_kinds import ROLLOUT, ROLLOUT_QUARANTINED
from ..log.events import EventLog
from ..log.outcome_ledger import Key, Outcome, OutcomeLedger, outcome, rollout_key
from .index import RolloutIndex
from .record import RecordError, RolloutRecord


class LoggedDigests:
    """Each train and val rollout's key → the sha256 its newest event recorded (None: older events).

    The outcome check does not cover a file's other fields (output, trace), so a file read again is
    also held to its event's sha256; digests are learnt from the log only when such a file is found."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self._digests: dict[Key, str | None] = {}
        self._position = (0, 0)

    def current(self) -> dict[Key, str | None]:
        """Under the run's lock: the digests caught up with the log."""
        tail = self.log.events_after(*self._position, self._see)
        if tail is None:
            self._digests, self._position = {}, (0, 0)
            tail = self.log.events_after(0, 0, self._see)
            if tail is None:
                self._digests = {}
                return self._digests
        self._position = tail[1], tail[2]
        return self._digests

    def _see(self, event: dict[str, Any]) -> None:
        if event.get("kind") == ROLLOUT and event.get("split") != TEST_SPLIT:
            key, self._digests[key] = logged_digest(event)


def logged_digest(event: dict[str, Any]) -> tuple[Key, str | None]:
    recorded = event.get("sha256")
    return rollout_key(event), recorded if isinstance(recorded, str) else None


class RolloutReadBack:
    root: Path
    run_id: str
    log: EventLog
    lock: Callable[[], AbstractContextManager[None]]
    index: RolloutIndex
    notices: list[str]
    ledger: OutcomeLedger
    digests: LoggedDigests

    def _truth(self) -> dict[Key, Outcome]:
        return self.ledger.current(self.index.every)

    def _test_truth(self) -> tuple[dict[Key, Outcome], dict[Key, str | None]]:
        """Every test rollout's logged outcome and sha256 (test is in no index or ledger, and code run
        during finalize could otherwise rewrite paid test rollouts before the seal burned)."""
        truth: dict[Key, Outcome] = {}
        digests: dict[Key, str | None] = {}
        # the log is the truth here only if its chain holds: a test event edited to match a
        # forged file broke the next line's link, and the seal burned the forged mean anyway
        path = self.log.events_path
        _, problem = verify_events(path)
        events = verified_events(path) if problem is None else None
        if events is None:
            raise RunDirError(
                f"{path}: {problem or 'it changed while its chain was checked'}: no test rollout is "
                "scored against a log that does not verify; run `capevolve verify`"
            )
        # the seal reads only what a session claimed and paid once (:mod:`..log.paid_by`)
        in_file = self.ledger.file_of  # (split, task, tag, trial) → its file
        kinds = (e for e in events if e.get("kind") in paid_by.KINDS)
        paid_by.refuse_untrusted(kinds, self.run_id, lambda key: in_file(*key))
        for event in events:
            if event.get("kind") == ROLLOUT and event.get("split") == TEST_SPLIT:
                key, digests[key] = logged_digest(event)
                truth[key] = outcome(event.get("reward"), event.get("infra_error"), event.get("cost_usd"))
        return truth, digests

    def _read_one(
        self,
        path: Path,
        truth: dict[Key, Outcome] | None = None,
        digests: dict[Key, str | None] | None = None,
    ) -> RolloutRecord | None:
        """One rollout file, quarantined if damaged or its outcome is not the log's (``truth``), or (with
        ``digests``, and always for test) its bytes not its event's sha256.

        A file is judged without the lock, so a writer may have been between a new file's last byte
        and its event: a file found wanting is judged again under the lock, against the log as it is
        then, before it is moved aside (a rollout being recorded is never quarantined)."""
        found = self._judged(path, truth, digests)
        if not isinstance(found, str):
            return found
        with self.lock():
            again = self._judged(path, None, None if digests is None else self._digests_now(path))
            if isinstance(again, str):
                self.quarantine(path, again)
                return None
            return again

    def _digests_now(self, path: Path) -> dict[Key, str | None] | None:
        """Under the lock: the logged digests ``path``'s split is held to (test: read with its truth)."""
        return None if path.parent.name == TEST_SPLIT else self.digests.current()

    def _judged(
        self,
        path: Path,
        truth: dict[Key, Outcome] | None,
        digests: dict[Key, str | None] | None,
    ) -> RolloutRecord | str | None:
        """:meth:`_read_one`'s judgement: the record, the problem that quarantines the file, or None
        (no file)."""
        try:
            raw = read_plain_bytes(path)
            if not raw:  # created, then a kill or Ctrl-C before its first byte: say so, not "not JSON"
                return "empty: a write cut off before its first byte (a kill or Ctrl-C; no event records it)"
            record = RolloutRecord.loads(raw.decode("utf-8"), str(path))
            split = path.parent.name
            if truth is None or (split == TEST_SPLIT and digests is None):
                with self.lock():
                    truth, digests = self._test_truth() if split == TEST_SPLIT else (self._truth(), digests)
            key = (split, record.tag, record.task_id, int(record.trial))
            logged = truth.get(key)
            if logged != outcome(record.reward, record.infra_error, record.cost_usd):
                return _differs(record, logged)
            if digests is not None and self._bytes_differ(key, raw, digests):
                return (
                    "its bytes differ from what its rollout event recorded (sha256): edited after "
                    "it was written"
                )
            return record
        except FileNotFoundError:
            return None
        except RecordError as exc:
            if exc.newer:
                raise RunDirError(str(exc)) from None
            return str(exc).removeprefix(f"{path}: ")
        except (UnicodeDecodeError, OSError) as exc:
            return f"unreadable: {exc}"

    def _bytes_differ(self, key: Key, raw: bytes, digests: dict[Key, str | None]) -> bool:
        """Whether ``raw`` is not what ``key``'s newest event recorded (a mismatch is looked up again
        under the lock: it may have been paid again since)."""
        recorded = digests.get(key)
        if recorded is None or hashlib.sha256(raw).hexdigest() == recorded:
            return False
        if key[0] == TEST_SPLIT:  # read from the whole log just now (_test_truth): nothing newer
            return True
        with self.lock():
            recorded = self.digests.current().get(key)
        return recorded is not None and hashlib.sha256(raw).hexdigest() != recorded

    def quarantine(self, path: Path, problem: str) -> Path:
        rel = path.relative_to(self.root)
        dest = self.root / "rollouts" / ".quarantine" / rel.parent.name / f"{path.name}.{time.time_ns()}"
        with self.lock():
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, dest)
            self.log.append_event(
                ROLLOUT_QUARANTINED,
                file=rel.as_posix(),
                problem=problem,
                moved_to=dest.relative_to(self.root).as_posix(),
            )
        self.notices.append(
            f"{path}: {problem}; quarantined to {dest.relative_to(self.root)}: treated as missing, "
            "so it is paid again"
        )
        return dest


def _differs(record: RolloutRecord, logged: Outcome | None) -> str:
    said = f"reward {record.reward!r}, infra error {record.infra_error!r}, cost {record.cost_usd!r}"
    if logged is None:
        return f"no rollout event in the log records it (it says {said}): not evidence"
    was = f"reward {logged[0]!r}, infra error {logged[1]!r}, cost {logged[2]!r}"
    return f"it says {said}, but its rollout event logged {was}: edited after it was written"
