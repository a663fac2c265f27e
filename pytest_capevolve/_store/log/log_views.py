"""The files of a run that are views of its event log, behind one contract.

``events.jsonl`` is the record; ``state.json``, ``index.sqlite``, ``events_digest.json`` and
``views.json`` are caches of it, each remembering the point of the log it is current to.
``capevolve verify --repair`` goes through :func:`check_views`, the one repair path."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


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
