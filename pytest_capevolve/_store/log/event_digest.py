"""``events_digest.json``: what readers of the whole log need, without its rollout lines.

A view of ``events.jsonl`` (:class:`.log_views.LogView`), never the record. ``capevolve measure``
reads the run's decisions, verdicts, screens and null controls from the log, and counts its
rollout lines by split; at 60,000 rollouts that is 60,000 lines decoded for a few dozen events.
The digest keeps the events that are not rollouts, the rollout count per split, and the point of
the log it is current to; a reader catches it up from there (:meth:`.events.EventLog.events_after`)
and rewrites it. A digest that is missing, unreadable, or behind a log that no longer continues
where it stopped (repaired, replaced) is rebuilt from the whole log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import atomic_write_json, read_json
from .event_kinds import ROLLOUT
from .events import EventLog

if TYPE_CHECKING:
    from ..rundir import RunDir

DIGEST_NAME = "events_digest.json"


def digest(rundir: RunDir) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(every event that is not a ``rollout``, oldest first; rollout events per split) — what
    ``rundir.log.events()`` says, read from the digest and the log appended since. The rollout lines
    are counted as they are read, never held (a fresh run's tail is every rollout it paid)."""
    return EventsDigest(rundir.root, rundir.log).read()


class EventsDigest:
    """``events_digest.json`` under ``root``, a view of ``log`` (:class:`.log_views.LogView`),
    caught up by its readers (``capevolve measure``), not by a session's flush."""

    def __init__(self, root: Path, log: EventLog) -> None:
        self.path = root / DIGEST_NAME
        self.log = log

    @property
    def name(self) -> str:
        return DIGEST_NAME

    def read(self) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """What :func:`digest` answers; the file rewritten when the log moved on."""
        cached = _read(self.path)
        counts: dict[str, int] = {}
        if cached is not None:
            counts = dict(cached[2])
            tail = self.log.events_after(*cached[0], view=_counting(counts))
        if cached is None or tail is None:
            counts = {}
            cached, tail = ((0, 0), [], {}), self.log.events_after(0, 0, view=_counting(counts))
            if tail is None:  # a line that is not an event: the log's own reader says where
                events = self.log.events()
                return _split(events, [], {})
        others, offset, seq = tail
        others = list(cached[1]) + others
        if offset != cached[0][0]:
            with contextlib.suppress(OSError):  # a read-only copy of a run: read it as it is
                atomic_write_json(
                    self.path, {"through": [offset, seq], "events": others, "rollouts_by_split": counts}
                )
        return others, counts

    def catch_up(self) -> None:
        self.read()

    def check(self, events: list[dict[str, Any]], *, repair: bool) -> list[str]:
        """A digest the log continues from (so a reader would trust it) whose events or counts
        are not the log's up to its mark. Missing, unreadable or behind a rewritten log is no
        disagreement: its reader rebuilds it."""
        cached = _read(self.path)
        if cached is None or self.log.events_after(*cached[0], view=lambda event: None) is None:
            return []
        (_, seq), others, counts = cached
        want_others, want_counts = _split(events, [], {}, through=seq)
        problems = []
        if others != want_others:
            problems.append(f"{DIGEST_NAME}: its events differ from the log's up to seq {seq}")
        if counts != want_counts:
            problems.append(f"{DIGEST_NAME}: rollouts by split {counts}, but the log has {want_counts}")
        return problems

    def rebuild(self, problems: Sequence[str]) -> str:
        self.path.unlink(missing_ok=True)
        self.read()
        return f"{DIGEST_NAME}: rebuilt from the events ({len(problems)} disagreement(s))"


def _counting(counts: dict[str, int]) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """A ``view`` for :meth:`.events.EventLog.events_after`: rollouts counted by split into
    ``counts`` and dropped, every other event held."""

    def view(event: dict[str, Any]) -> dict[str, Any] | None:
        if event.get("kind") != ROLLOUT:
            return event
        split = str(event.get("split"))
        counts[split] = counts.get(split, 0) + 1
        return None

    return view


def _split(
    events: list[dict[str, Any]],
    others: list[dict[str, Any]],
    counts: dict[str, int],
    through: int | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``events`` (those up to seq ``through``, if given) as the digest holds them: rollouts
    counted by split into ``counts``, every other event added to ``others``."""
    for event in events:
        if through is not None and int(event.get("seq", 0)) > through:
            continue
        if event.get("kind") == ROLLOUT:
            split = str(event.get("split"))
            counts[split] = counts.get(split, 0) + 1
        else:
            others.append(event)
    return others, counts


def _read(path: Any) -> tuple[tuple[int, int], list[dict[str, Any]], dict[str, int]] | None:
    try:
        cached = read_json(path)
        offset, seq = (int(v) for v in cached["through"])
        others, counts = cached["events"], cached["rollouts_by_split"]
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError):
        return None
    if not isinstance(others, list) or not isinstance(counts, dict):
        return None
    return (offset, seq), others, {str(k): int(v) for k, v in counts.items()}
