"""One read of every rollout file, for ``capevolve verify``: each opened, parsed and hashed once.

No stat per file (the index's check stats only the rows that disagree); the audit and the index
view both read this one scan."""

from __future__ import annotations

import os
from collections.abc import Callable
from hashlib import sha256 as _sha256
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

from ..files import loads_utf8
from .index import CHECKED

FIELDS = ("split", "task_id", "tag", "trial", "reward", "infra_error", "cost_usd")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_READ_AT_ONCE = 1 << 16  # bytes asked of the first read of a file

# A file as a session writes it is kept as one plain tuple laid out as the index's row for it
# (:meth:`.index.RolloutIndex.checked`): its name, its size, then CHECKED as the file says them,
# so the index's check compares a split's rows with these at once.
Row = tuple[Any, ...]


class OddFile(NamedTuple):
    """A rollout file not as a session writes it: ``data`` the fields it holds, or the JSON value
    that is not an object, or None with ``error`` saying why it could not be read."""

    name: str
    size: int
    data: Any
    error: str | None


Scanned = Row | OddFile


def data_of(seen: Scanned, split: str) -> Any:
    """The fields a file of ``split``'s folder holds (or its value that is not an object, or None)."""
    if type(seen) is tuple:
        return {"split": split, **dict(zip(CHECKED, seen[2:], strict=True))}
    return seen.data  # type: ignore[union-attr]


def error_of(seen: Scanned) -> str | None:
    """Why the file could not be read (None: it was)."""
    return None if type(seen) is tuple else seen.error  # type: ignore[union-attr]


class RolloutScan(NamedTuple):
    """What one scan found: each split's ``files`` sorted by name and their ``digests`` (None: not
    read), the ``folders`` listed, and the ``leftovers`` of interrupted atomic writes in them."""

    files: dict[str, list[Scanned]]
    folders: frozenset[str]
    leftovers: list[str]
    digests: dict[str, list[str | None]]


def scan_rollouts(root: Path) -> RolloutScan:
    """Every ``rollouts/<split>/*.json`` under ``root`` (not the dot folders: quarantine)."""
    base = os.path.join(root, "rollouts")
    try:
        splits = sorted(e.name for e in os.scandir(base) if e.is_dir() and not e.name.startswith("."))
    except FileNotFoundError:
        return RolloutScan({}, frozenset(), [], {})
    scanned: dict[str, list[Scanned]] = {}
    digests: dict[str, list[str | None]] = {}
    folders, leftovers = set(), []
    for split in splits:
        folder = os.path.join(base, split)
        names = os.listdir(folder)
        folders.add(folder)
        leftovers += [f"{folder}/{n}" for n in names if n[:1] == "." and is_leftover(n)]
        hashed: list[str | None] = []
        keep = hashed.append
        scanned[split] = [
            _read(f"{folder}/{name}", split, name, keep)
            for name in sorted(n for n in names if n.endswith(".json"))
        ]
        digests[split] = hashed
    return RolloutScan(scanned, frozenset(folders), sorted(leftovers), digests)


def is_leftover(name: str) -> bool:
    """Whether ``name`` is an unfinished atomic write's (``.*.tmp``, as :mod:`..files` names them)."""
    return len(name) > 4 and name.startswith(".") and name.endswith(".tmp")


def _read(path: str, split: str, name: str, keep: Callable[[str | None], None]) -> Scanned:
    # os.open/os.read: no buffered file object per file (a third of the scan's time); a read
    # shorter than asked is the end of a regular file, a full one may have more.
    try:
        fd = os.open(path, _OPEN_FLAGS)
        try:
            raw = os.read(fd, _READ_AT_ONCE)
            if len(raw) == _READ_AT_ONCE:
                raw += _rest(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        keep(None)
        return OddFile(name, -1, None, str(exc))
    keep(_sha256(raw).hexdigest())
    try:
        record = loads_utf8(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return OddFile(name, len(raw), None, str(exc))
    if not isinstance(record, dict):
        return OddFile(name, len(raw), record, None)
    if record.get("split") == split:  # a file as a session writes it: every field, in its split
        try:
            checked: tuple[Any, ...] = _CHECKED_OF(record)
            return (name, len(raw)) + checked
        except KeyError:
            pass
    # (a field missing, or a split not its folder's: those it has)
    return OddFile(name, len(raw), {f: record[f] for f in FIELDS if f in record}, None)


_CHECKED_OF = itemgetter(*CHECKED)


def _rest(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)
