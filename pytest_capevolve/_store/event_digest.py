"""``events_digest.json``: what readers of the whole log need, without its rollout lines.

A part of the run dir; a cache of ``events.jsonl``, never the record. ``capevolve measure``
reads the run's decisions, verdicts, screens and null controls from the log, and counts its
rollout lines by split; at 60,000 rollouts that is 60,000 lines decoded for a few dozen events.
The digest keeps the events that are not rollouts, the rollout count per split, and the point of
the log it is current to; a reader catches it up from there (:meth:`.events.EventLog.events_after`)
and rewrites it. A digest that is missing, unreadable, or behind a log that no longer continues
where it stopped (repaired, replaced) is rebuilt from the whole log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .files import atomic_write_json, read_json

if TYPE_CHECKING:
    from .rundir import RunDir

DIGEST_NAME = "events_digest.json"


def digest(rundir: RunDir) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(every event that is not a ``rollout``, oldest first; rollout events per split) — what
    ``rundir.log.events()`` says, read from the digest and the log appended since. The rollout lines
    are counted as they are read, never held (a fresh run's tail is every rollout it paid)."""
    path = rundir.root / DIGEST_NAME
    cached = _read(path)
    counts: dict[str, int] = {}
    if cached is not None:
        counts = dict(cached[2])
        tail = rundir.log.events_after(*cached[0], view=_counting(counts))
    if cached is None or tail is None:
        counts = {}
        cached, tail = ((0, 0), [], {}), rundir.log.events_after(0, 0, view=_counting(counts))
        if tail is None:  # a line that is not an event: the log's own reader says where
            events = rundir.log.events()
            return _split(events, [], {})
    others, offset, seq = tail
    others = list(cached[1]) + others
    if offset != cached[0][0]:
        with contextlib.suppress(OSError):  # a read-only copy of a run: read it as it is
            atomic_write_json(path, {"through": [offset, seq], "events": others, "rollouts_by_split": counts})
    return others, counts


def _counting(counts: dict[str, int]) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """A ``view`` for :meth:`.events.EventLog.events_after`: rollouts counted by split into
    ``counts`` and dropped, every other event held."""

    def view(event: dict[str, Any]) -> dict[str, Any] | None:
        if event.get("kind") != "rollout":
            return event
        split = str(event.get("split"))
        counts[split] = counts.get(split, 0) + 1
        return None

    return view


def _split(
    events: list[dict[str, Any]], others: list[dict[str, Any]], counts: dict[str, int]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    for event in events:
        if event.get("kind") == "rollout":
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
