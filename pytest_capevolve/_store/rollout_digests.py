"""The sha256 each ``rollout`` event recorded for its file's bytes, for the files a session
reads again.

A rollout file read back is held to its event's outcome (reward, infra error, cost:
:mod:`.outcome_ledger`), which its other fields — the output, the trace, the feedback, the
metrics, what the optimizer is shown — are not part of. So a file a session reads again (its
size or mtime changed since it was indexed, or no row knows it) is also held to the sha256 of
the bytes its event recorded. The digests are learnt from the log only when such a file is
found — one pass over its rollout lines, then only what was appended since — never on a resume
whose files are all as indexed. Controller only, under the run's lock.
"""

from __future__ import annotations

from typing import Any

from .._project.splits import TEST_SPLIT
from .event_kinds import ROLLOUT
from .events import EventLog
from .outcome_ledger import Key


class LoggedDigests:
    """tag, task and trial of each train and val rollout → the sha256 its newest ``rollout``
    event recorded (None: an event written before events carried it), current with ``log``."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self._digests: dict[Key, str | None] = {}
        self._position = (0, 0)

    def current(self) -> dict[Key, str | None]:
        """Under the run's lock: the digests, caught up with the log (read anew when it does
        not continue where they stopped: repaired or replaced; a line that is not an event
        leaves none known, and the outcome check refuses the run)."""
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
    """A ``rollout`` event's key and the sha256 it recorded (None: written before events did)."""
    key = (str(event["split"]), str(event["tag"]), str(event["task_id"]), int(event["trial"]))
    recorded = event.get("sha256")
    return key, recorded if isinstance(recorded, str) else None
