"""A task is its content as well as its id: the keys the project's memory matches tasks by.

Renaming ids must not make sealed test tasks new, so each task also has a content key: the sha256
of its input, target and metadata as canonical JSON. Content not unique in the pool gets no key, and
an unstable ``repr`` can only be missed, never matched wrongly."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..files import RunDirError
from ..log.event_kinds import TASK_KEYS

KEY_LENGTH = 32  # hex digits: 128 bits
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def content_key(task: Any) -> str:
    row = [getattr(task, "input", None), getattr(task, "target", None), getattr(task, "metadata", None) or {}]
    text = json.dumps(row, sort_keys=True, default=_encoded, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_LENGTH]


def _encoded(value: Any) -> Any:
    """What JSON cannot hold: sets sorted, bytes as hex, anything else by type and ``repr``."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    return {type(value).__qualname__: _ADDRESS.sub("", repr(value))}


def of_pool(pool: Mapping[str, Any]) -> dict[str, str]:
    keys = {task_id: content_key(task) for task_id, task in pool.items()}
    counts = Counter(keys.values())
    return {task_id: key for task_id, key in keys.items() if counts[key] == 1}


def ensure_recorded(
    rundir: Any, keys_now: Callable[[], Mapping[str, str]] | None, splits: Mapping[str, Any]
) -> None:
    """Append the run's ``task_keys`` event the first time a session plans (the harness lock keeps
    the pool, so the keys cannot move within a run)."""
    if keys_now is None or rundir.log.of_kinds(TASK_KEYS):
        return
    mine = {str(t) for name in ("train", "val", "test") for t in splits.get(name, [])}
    rundir.log.append_event(TASK_KEYS, keys={t: k for t, k in sorted(keys_now().items()) if t in mine})


def recorded(rundir: Any) -> dict[str, str]:
    """id → content key from the run's first ``task_keys`` event ({}: none or unreadable; match by id)."""
    try:
        events = rundir.log.of_kinds(TASK_KEYS)
    except (OSError, ValueError, RunDirError):
        return {}
    keys = events[0].get("keys") if events else None
    return {str(t): str(k) for t, k in keys.items()} if isinstance(keys, dict) else {}


@dataclass(frozen=True)
class Tasks:
    """A set of tasks as the memory knows them: ids and content keys."""

    ids: frozenset[str] = frozenset()
    keys: frozenset[str] = frozenset()

    @classmethod
    def of(cls, ids: Iterable[str], keys: Mapping[str, str] | None = None) -> Tasks:
        chosen = frozenset(map(str, ids))
        return cls(chosen, frozenset((keys or {})[t] for t in chosen if t in (keys or {})))

    def __len__(self) -> int:
        return max(len(self.ids), len(self.keys))

    def shared(self, other: Tasks, keys: Mapping[str, str] | None = None) -> list[str]:
        """The ids of these tasks that ``other`` holds by id or by content, sorted."""
        return sorted(t for t in self.ids if t in other.ids or (keys or {}).get(t) in other.keys)

    def same_as(self, other: Tasks, keys: Mapping[str, str] | None = None) -> bool:
        return len(self.shared(other, keys)) == len(self.ids) and len(other) <= len(self.ids)

    def row(self, prefix: str) -> dict[str, list[str]]:
        return {f"{prefix}_ids": sorted(self.ids), f"{prefix}_keys": sorted(self.keys)}

    @classmethod
    def from_row(cls, row: Mapping[str, Any], prefix: str, *, foreign: bool = False) -> Tasks:
        """The tasks a memory row names (``foreign``: another project's, its ids left out)."""
        ids = row.get(f"{prefix}_ids")
        keys = row.get(f"{prefix}_keys")
        return cls(
            frozenset() if foreign or not isinstance(ids, list) else frozenset(map(str, ids)),
            frozenset(map(str, keys)) if isinstance(keys, list) else frozenset(),
        )
