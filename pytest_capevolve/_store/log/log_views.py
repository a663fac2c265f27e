"""The files of a run that are views of its event log, behind one contract.

``events.jsonl`` is the record; ``state.json``, ``index.sqlite``, ``events_digest.json`` and
``views.json`` are caches of it, each remembering the point of the log it is current to.
``capevolve verify --repair`` goes through :func:`check_views`, the one repair path. The last two
are here: ``capevolve measure`` needs a few dozen events and the rollout count per split, not every
rollout line decoded, so ``events_digest.json`` keeps those."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..files import atomic_write_json, read_json
from .event_kinds import ROLLOUT
from .events import EventLog

if TYPE_CHECKING:
    from ..rundir import RunDir

DIGEST_NAME = "events_digest.json"


class LogView(Protocol):
    """A file of the run derived from ``events.jsonl``, never the record itself."""

    @property
    def name(self) -> str: ...

    def catch_up(self) -> None:
        """Under the lock: apply the events appended since it was last current."""
        ...

    def rebuild(self, problems: Sequence[str]) -> str:
        """Under the lock: make it again from the whole log; the notice saying so."""
        ...

    def check(self, events: list[dict[str, Any]], *, repair: bool) -> list[str]:
        """One line per disagreement with the whole log; ``repair=False`` writes nothing."""
        ...


def check_views(
    views: Iterable[LogView],
    events: list[dict[str, Any]],
    lock: Callable[[], AbstractContextManager[None]],
    notices: list[str],
    *,
    repair: bool,
) -> list[str]:
    """Every view checked against the log; with ``repair``, one that disagrees is rebuilt instead."""
    problems: list[str] = []
    for view in views:
        found = view.check(events, repair=repair)
        if found and repair:
            with lock():
                notice = view.rebuild(found)
            notices.append(notice)
            continue
        problems += found
    return problems


class PagesStamp:
    """``views.json``: what ``report.md`` and ``dashboard.html`` were last drawn from. Anything in
    doubt (missing, unreadable, behind a rewritten log) means the pages are drawn again."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def name(self) -> str:
        return self.path.name

    def read(self) -> dict[str, Any] | None:
        try:
            stamp = read_json(self.path)
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        return stamp if isinstance(stamp, dict) else None

    def write(self, stamp: dict[str, Any]) -> None:
        atomic_write_json(self.path, stamp)

    def catch_up(self) -> None:
        """Nothing: it is current only to the pages, which the session's end draws."""

    def check(self, events: list[dict[str, Any]], *, repair: bool) -> list[str]:
        return []  # compared whole by its reader: in doubt, the pages are drawn again

    def rebuild(self, problems: Sequence[str]) -> str:
        self.path.unlink(missing_ok=True)
        return f"{self.name}: removed; the next session draws the pages again"


def digest(rundir: RunDir) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(every event that is not a ``rollout``, oldest first; rollout events per split)."""
    return EventsDigest(rundir.root, rundir.log).read()


class EventsDigest:
    """``events_digest.json``: the events that are not rollouts, and rollouts per split; caught up
    by its readers (``capevolve measure``), not by a flush."""

    def __init__(self, root: Path, log: EventLog) -> None:
        self.path = root / DIGEST_NAME
        self.log = log

    @property
    def name(self) -> str:
        return DIGEST_NAME

    def read(self) -> tuple[list[dict[str, Any]], dict[str, int]]:
        cached = _read(self.path)
        counts: dict[str, int] = {}
        if cached is not None:
            counts = dict(cached[2])
            tail = self.log.events_after(*cached[0], view=_counting(counts))
        if cached is None or tail is None:
            counts = {}
            cached, tail = ((0, 0), [], {}), self.log.events_after(0, 0, view=_counting(counts))
            if tail is None:  # a line that is not an event: the log's own reader says where
                return _split(self.log.events())
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
        """A digest a reader would trust whose events or counts are not the log's up to its mark."""
        cached = _read(self.path)
        if cached is None or self.log.events_after(*cached[0], view=lambda event: None) is None:
            return []
        (_, seq), others, counts = cached
        want_others, want_counts = _split([e for e in events if int(e.get("seq", 0)) <= seq])
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
    """A ``view`` for :meth:`.events.EventLog.events_after`: rollouts counted by split and dropped."""

    def view(event: dict[str, Any]) -> dict[str, Any] | None:
        if event.get("kind") != ROLLOUT:
            return event
        split = str(event.get("split"))
        counts[split] = counts.get(split, 0) + 1
        return None

    return view


def _split(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``events`` as the digest holds them: the events that are not rollouts, rollouts by split."""
    counts: dict[str, int] = {}
    view = _counting(counts)
    return [event for event in events if view(event) is not None], counts


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
