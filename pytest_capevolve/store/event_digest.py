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
from typing import TYPE_CHECKING, Any

from .files import atomic_write_json, read_json

if TYPE_CHECKING:
    from .rundir import RunDir

DIGEST_NAME = "events_digest.json"


def digest(rundir: RunDir) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(every event that is not a ``rollout``, oldest first; rollout events per split) — what
    ``rundir.events()`` says, read from the digest and the log appended since."""
    path = rundir.root / DIGEST_NAME
    cached = _read(path)
    tail = None if cached is None else rundir.events_after(*cached[0])
    if tail is None:
        cached, tail = ((0, 0), [], {}), rundir.events_after(0, 0)
        if tail is None:  # a line that is not an event: the log's own reader says where
            events = rundir.events()
            return _split(events, [], {})
    events, offset, seq = tail
    others, counts = _split(events, list(cached[1]), dict(cached[2]))
    if events:
        with contextlib.suppress(OSError):  # a read-only copy of a run: read it as it is
            atomic_write_json(path, {"through": [offset, seq], "events": others, "rollouts_by_split": counts})
    return others, counts


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
