"""A task is its content as well as its id: the keys the project's memory matches tasks by.

The project's memory (:mod:`.project_memory`: which test tasks were scored, which bytes were
decided on which val) once named tasks by id only. An id is the adapter's label, not the task:
``sed -i 's/id=f"t{i:02d}"/id=f"T{i:02d}"/' adapter.py`` made every sealed test task and
every val a decision was taken on new to the project. So each task also has a **content key**:
the sha256 (32 hex digits) of its input, target and metadata as canonical JSON — never its id
— and two tasks overlap when they share the id *or* the key. Only digests are kept: an
adapter whose task input is a whole repository is recorded in 32 characters a task.

A key is only a key when it tells tasks apart. Tasks whose content is not unique in the pool
(an adapter that keeps everything in the id: ``Task(id="airline-17")``, no input) get none and
are matched by id alone; a value JSON cannot hold is encoded by its type and ``repr`` with
memory addresses taken out (an object whose ``repr`` is not stable has no stable key: it can
only be missed, never matched wrongly).

Where the keys live:

- each run's log, one ``task_keys`` event (the first one counts) with every task of its splits,
  written by the first session that plans in the run — the record, hash-chained like the rest;
- each row of the project's memory carries the keys of the tasks it is about (``test_keys``,
  ``val_keys``);
- an **index by content** outside any project, ``$CAPEVOLVE_STATE_DIR/by_task/<kind>.jsonl``:
  every such row again, with the project it came from. The copy outside the project is keyed by
  the project's path, so a copy of the project at another path (``cp -r`` without
  ``.capevolve``) would find nothing there; the index is read for rows of *other* projects whose
  content keys meet this pool's, and only content counts for those (their ids are another
  project's labels: an unrelated project with ids ``t00…t29`` is never blocked by them).

Pure but for the index's file and the log event; controller side or the CLI.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import project_memory
from .files import RunDirError

EVENT = "task_keys"
INDEX_DIR = "by_task"
BY_CONTENT = "outside the project (by task content)"
KEY_LENGTH = 32  # hex digits: 128 bits
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def content_key(task: Any) -> str:
    """The digest of a task's input, target and metadata (canonical JSON), not of its id."""
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
    """id → content key for the pool's tasks whose content is unique in the pool."""
    keys = {task_id: content_key(task) for task_id, task in pool.items()}
    counts: dict[str, int] = {}
    for key in keys.values():
        counts[key] = counts.get(key, 0) + 1
    return {task_id: key for task_id, key in keys.items() if counts[key] == 1}


def ensure_recorded(rundir: Any, keys_now: Mapping[str, str] | None, splits: Mapping[str, Any]) -> None:
    """Append the run's ``task_keys`` event (its splits' tasks) the first time a session plans
    in it with the pool at hand; a run that has one keeps it (the harness lock holds the pool
    to what it was, so the keys cannot move within a run)."""
    if keys_now is None or rundir.log.of_kinds(EVENT):
        return
    mine = {str(t) for name in ("train", "val", "test") for t in splits.get(name, [])}
    rundir.log.append_event(EVENT, keys={t: k for t, k in sorted(keys_now.items()) if t in mine})


def recorded(rundir: Any) -> dict[str, str]:
    """id → content key, from the run's first ``task_keys`` event ({} for a run older than it,
    or one whose log cannot be read: matched by id alone)."""
    try:
        events = rundir.log.of_kinds(EVENT)
    except (OSError, ValueError, RunDirError):
        return {}
    keys = events[0].get("keys") if events else None
    return {str(t): str(k) for t, k in keys.items()} if isinstance(keys, dict) else {}


@dataclass(frozen=True)
class Tasks:
    """A set of tasks as the memory knows them: ids and content keys (either may be empty:
    a row from another project has no ids that count; an old row no keys)."""

    ids: frozenset[str] = frozenset()
    keys: frozenset[str] = frozenset()

    @classmethod
    def of(cls, ids: Iterable[str], keys: Mapping[str, str] | None = None) -> Tasks:
        """``ids`` with their keys looked up in ``keys`` (id → key)."""
        chosen = frozenset(map(str, ids))
        return cls(chosen, frozenset((keys or {})[t] for t in chosen if t in (keys or {})))

    def __len__(self) -> int:
        return max(len(self.ids), len(self.keys))

    def shared(self, other: Tasks, keys: Mapping[str, str] | None = None) -> list[str]:
        """The ids of these tasks (``keys``: their id → key) that ``other`` holds by id or by
        content, sorted."""
        return sorted(t for t in self.ids if t in other.ids or (keys or {}).get(t) in other.keys)

    def same_as(self, other: Tasks, keys: Mapping[str, str] | None = None) -> bool:
        """Whether ``other`` is the same task set: every task of each is in the other."""
        if len(self.shared(other, keys)) != len(self.ids):
            return False
        return len(other) <= len(self.ids)

    def row(self, prefix: str) -> dict[str, list[str]]:
        """The fields a memory row keeps: ``<prefix>_ids`` and ``<prefix>_keys``, sorted."""
        return {f"{prefix}_ids": sorted(self.ids), f"{prefix}_keys": sorted(self.keys)}

    @classmethod
    def from_row(cls, row: Mapping[str, Any], prefix: str, *, foreign: bool = False) -> Tasks:
        """The tasks a memory row names (``foreign``: a row of another project, its ids left out)."""
        ids = row.get(f"{prefix}_ids")
        keys = row.get(f"{prefix}_keys")
        return cls(
            frozenset() if foreign or not isinstance(ids, list) else frozenset(map(str, ids)),
            frozenset(map(str, keys)) if isinstance(keys, list) else frozenset(),
        )


def index_path(kind: str) -> Path:
    """The index by content of the project memory's ``kind`` rows, outside every project (in
    the same root as the copies outside each project)."""
    root = os.environ.get(project_memory.STATE_DIR_ENV) or str(Path.home() / ".local" / "state" / "capevolve")
    return Path(root) / INDEX_DIR / f"{kind}.jsonl"


def index(project_dir: Path, kind: str, row: Mapping[str, Any]) -> None:
    """Append ``row`` (with the project it is about) to the index by content; best effort, as
    the copy outside the project is."""
    with contextlib.suppress(OSError):
        line = json.dumps({**row, "project": str(project_dir.resolve())}, sort_keys=True)
        project_memory.append_line(index_path(kind), line)


def indexed(project_dir: Path, kind: str, prefix: str, mine: Iterable[str]) -> list[dict[str, Any]]:
    """The index's rows of *other* projects whose ``<prefix>_keys`` meet ``mine`` (this pool's
    content keys): what a copy of a project at another path still has to see."""
    path = index_path(kind)
    wanted = frozenset(mine)
    if not wanted or not path.is_file():
        return []
    here = str(project_dir.resolve())
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            keys = row.get(f"{prefix}_keys") if isinstance(row, dict) else None
            if isinstance(keys, list) and row.get("project") != here and wanted.intersection(map(str, keys)):
                found.append(row)
    return found
