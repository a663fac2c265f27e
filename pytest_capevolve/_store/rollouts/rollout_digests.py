"""The sha256 each ``rollout`` event recorded for its file's bytes, for the files a session reads again.

The outcome check does not cover a file's other fields (output, trace), so a file read again is also
held to its event's sha256; digests are learnt from the log only when such a file is found."""

from __future__ import annotations

from typing import Any

from ..._project.splits import TEST_SPLIT
from ..log.event_kinds import ROLLOUT
from ..log.events import EventLog
from ..log.outcome_ledger import Key, rollout_key


class LoggedDigests:
    """Each train and val rollout's key → the sha256 its newest event recorded (None: older events)."""

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
            key, recorded = logged_digest(event)
            self._digests[key] = recorded


def logged_digest(event: dict[str, Any]) -> tuple[Key, str | None]:
    recorded = event.get("sha256")
    return rollout_key(event), recorded if isinstance(recorded, str) else None
