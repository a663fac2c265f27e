"""The files of a run that are views of its event log, behind one contract.

``events.jsonl`` is the record; ``state.json`` (:class:`..decisions.state.RunState`), ``index.sqlite``
(:class:`..rollouts.index_sync.IndexView`), ``events_digest.json`` (:class:`.event_digest.EventsDigest`)
and ``views.json`` (:class:`.pages_stamp.PagesStamp`) are caches of it, each remembering the
point of the log it is current to. Each is a :class:`LogView`: it catches up with the events
appended since (a session's flush), rebuilds itself from the whole log, and checks itself
against it. ``capevolve verify`` (:func:`..readers.audit.audit`) and its ``--repair`` go through
:func:`check_views`, the one repair path: a view that disagrees is rebuilt, under the lock.
Controller only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


class LogView(Protocol):
    """A file of the run derived from ``events.jsonl``, never the record itself."""

    @property
    def name(self) -> str:
        """The file's name, as verify's lines say it."""
        ...

    def catch_up(self) -> None:
        """Under the lock: apply the events appended since it was last current (a view that
        is drawn by its reader only, when read, has nothing to do here)."""
        ...

    def rebuild(self, problems: Sequence[str]) -> str:
        """Under the lock: make it again from the whole log (and the files it stands for),
        because of ``problems`` (what :meth:`check` found); the notice saying so."""
        ...

    def check(self, events: list[dict[str, Any]], *, repair: bool) -> list[str]:
        """One line per disagreement with ``events`` (the whole log; empty: it agrees). A
        reader that would notice and rebuild the view by itself is no disagreement.
        ``repair=False`` writes nothing."""
        ...


def check_views(
    views: Iterable[LogView],
    events: list[dict[str, Any]],
    lock: Callable[[], AbstractContextManager[None]],
    notices: list[str],
    *,
    repair: bool,
) -> list[str]:
    """Every view checked against the log, in order; with ``repair``, each that disagrees is
    rebuilt (said in ``notices``) instead of reported."""
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
