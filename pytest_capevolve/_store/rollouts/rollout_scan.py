"""One read of every rollout file, for ``capevolve verify``: each file opened once, its bytes
parsed once and hashed once (the sha256 its ``rollout`` event recorded), with names kept as
strings. No stat per file: the size is the bytes read, and the
mtime, which only the index's check needs and only for a row that disagrees with its file, is
taken there, for those few (an fstat per file was a tenth of the scan at 60,000 files).

The audit (:mod:`..readers.audit`) checks the files against the log and the index view
(:mod:`.index_sync`) checks its rows against the same files; both read this one scan, so a
60,000-rollout run is read once (it was read twice, with three ``Path`` operations per file
per check). The listing of each split folder also names the unfinished writes in it, so the
audit's look for them need not list those folders again. Reads only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from hashlib import sha256 as _sha256
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

from ..json_value import loads_utf8
from .index import CHECKED

FIELDS = ("split", "task_id", "tag", "trial", "reward", "infra_error", "cost_usd")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_READ_AT_ONCE = 1 << 16  # bytes asked of the first read of a file

# A file as a session writes it (an object holding every field of FIELDS, in its own split's
# folder) is kept as one plain tuple laid out as the index's row for it
# (:meth:`.index.RolloutIndex.checked`): its name, its size (the bytes read), then CHECKED as
# the file says them. The index's check compares a split's rows with these at once, with no
# tuple made per file, and the audit unpacks them; 60,000 are built in one scan (a NamedTuple
# holding a tuple of the fields was two tuples, and a third made per file to compare).
Row = tuple[Any, ...]


class OddFile(NamedTuple):
    """A rollout file not as a session writes it: ``data`` the fields it holds (a missing one
    absent; all of them, for a file whose split is not its folder's), or the JSON value that
    is not an object, or None with ``error`` saying why it could not be read. ``size``: the
    bytes read (-1: none). ``[0]`` and ``[1]`` are a :data:`Row`'s: the name and the size."""

    name: str
    size: int
    data: Any
    error: str | None


Scanned = Row | OddFile


def data_of(seen: Scanned, split: str) -> Any:
    """The fields a file of ``split``'s folder holds, as a dict (a missing one absent), or what
    it held that is not an object, or None: what the checks read where they look field by field."""
    if type(seen) is tuple:
        return {"split": split, **dict(zip(CHECKED, seen[2:], strict=True))}
    return seen.data  # type: ignore[union-attr]


def error_of(seen: Scanned) -> str | None:
    """Why the file could not be read (None: it was)."""
    return None if type(seen) is tuple else seen.error  # type: ignore[union-attr]


class RolloutScan(NamedTuple):
    """What one scan found: the rollout ``files`` of each split folder (the splits in order,
    each one's files sorted by name); the ``folders`` it listed (absolute paths), and the
    ``leftovers`` in them — ``.<name>.tmp`` files of atomic writes that never completed
    (absolute paths, sorted); the ``digests`` of each split's files, in the order of ``files``:
    the sha256 (hex) of the bytes read, None for a file that could not be read."""

    files: dict[str, list[Scanned]]
    folders: frozenset[str]
    leftovers: list[str]
    digests: dict[str, list[str | None]]


def scan_rollouts(root: Path) -> RolloutScan:
    """Every ``rollouts/<split>/*.json`` under the run dir ``root`` (split folders whose name
    starts with a dot — quarantine — are left out)."""
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
    # os.open/os.read rather than open(): no buffered file object per file (a third of the
    # scan's time at 60,000 files). A read shorter than asked is the end of a regular file (a
    # rollout file is a few hundred bytes: one read); a full one may have more: read to EOF.
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
    keep(_sha256(raw).hexdigest())  # the bytes already read: ~0.03 s at 60,000 files
    # A file as a session writes it, in line: UTF-8, one JSON object from its first character
    # holding every field, its split its folder's, nothing but whitespace after it (what
    # loads_utf8 takes without json.loads). Anything else, or any doubt, is read again below.
    try:
        text = raw.decode("utf-8")
        record, end = _SCAN_ONCE(text, 0)
        if (end == len(text) or not text[end:].strip(_WHITESPACE)) and record["split"] == split:
            checked: tuple[Any, ...] = _CHECKED_OF(record)
            return (name, len(raw)) + checked
    except (ValueError, StopIteration, KeyError, TypeError):
        pass
    try:
        record = loads_utf8(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return OddFile(name, len(raw), None, str(exc))
    if not isinstance(record, dict):
        return OddFile(name, len(raw), record, None)
    if record.get("split") == split:
        try:
            checked = _CHECKED_OF(record)
            return (name, len(raw)) + checked
        except KeyError:
            pass
    # (a field missing, or a split not its folder's: those it has)
    return OddFile(name, len(raw), {f: record[f] for f in FIELDS if f in record}, None)


_CHECKED_OF = itemgetter(*CHECKED)
_SCAN_ONCE = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads's parser (C)
_WHITESPACE = " \t\n\r"  # JSON's, not str.isspace's


def _rest(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)
