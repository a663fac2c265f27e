"""One read of every rollout file, for ``capevolve verify``: each file opened once, its bytes
parsed once, with names kept as strings. No stat per file: the size is the bytes read, and the
mtime, which only the index's check needs and only for a row that disagrees with its file, is
taken there, for those few (an fstat per file was a tenth of the scan at 60,000 files).

The audit (:mod:`.audit`) checks the files against the log and the index view
(:mod:`.index_sync`) checks its rows against the same files; both read this one scan, so a
60,000-rollout run is read once (it was read twice, with three ``Path`` operations per file
per check). The listing of each split folder also names the unfinished writes in it, so the
audit's look for them need not list those folders again. Reads only.
"""

from __future__ import annotations

import json
import os
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

from .json_value import loads_utf8

FIELDS = ("split", "task_id", "tag", "trial", "reward", "infra_error", "cost_usd")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_READ_AT_ONCE = 1 << 16  # bytes asked of the first read of a file


class ScannedFile(NamedTuple):  # a tuple: 60,000 of them are built in one scan
    """One rollout file as read: ``values`` the fields the checks compare, in :data:`FIELDS`
    order, when the record is an object holding every one (as every file a session writes
    does: a tuple costs half a dict to make); else ``other``, the fields it holds (a missing
    one absent) or the JSON value that is not an object, or None with ``error`` saying why
    it could not be read. The record itself is not kept, so 60,000 files hold a few MB.
    ``size``: the bytes read (-1: none)."""

    split: str
    name: str
    values: tuple[Any, ...] | None
    other: Any
    error: str | None
    size: int

    @property
    def data(self) -> Any:
        """The fields as a dict (a missing one absent), or what the file held that is not an
        object, or None: what the checks read where a file is not as a session writes it."""
        return dict(zip(FIELDS, self.values, strict=True)) if self.values is not None else self.other

    @property
    def rel(self) -> str:
        """``rollouts/<split>/<name>``, as verify's lines name the file (made where one does)."""
        return f"rollouts/{self.split}/{self.name}"


class RolloutScan(NamedTuple):
    """What one scan found: the rollout ``files``, sorted by (split, name); the ``folders`` it
    listed (absolute paths), and the ``leftovers`` in them — ``.<name>.tmp`` files of atomic
    writes that never completed (absolute paths, sorted)."""

    files: list[ScannedFile]
    folders: frozenset[str]
    leftovers: list[str]


def scan_rollouts(root: Path) -> RolloutScan:
    """Every ``rollouts/<split>/*.json`` under the run dir ``root`` (split folders whose name
    starts with a dot — quarantine — are left out)."""
    base = os.path.join(root, "rollouts")
    try:
        splits = sorted(e.name for e in os.scandir(base) if e.is_dir() and not e.name.startswith("."))
    except FileNotFoundError:
        return RolloutScan([], frozenset(), [])
    scanned, folders, leftovers = [], set(), []
    for split in splits:
        folder = os.path.join(base, split)
        names = os.listdir(folder)
        folders.add(folder)
        leftovers += [f"{folder}/{n}" for n in names if n[:1] == "." and is_leftover(n)]
        for name in sorted(n for n in names if n.endswith(".json")):
            scanned.append(_read(f"{folder}/{name}", split, name))
    return RolloutScan(scanned, frozenset(folders), sorted(leftovers))


def is_leftover(name: str) -> bool:
    """Whether ``name`` is an unfinished atomic write's (``.*.tmp``, as :mod:`.files` names them)."""
    return len(name) > 4 and name.startswith(".") and name.endswith(".tmp")


def _read(path: str, split: str, name: str) -> ScannedFile:
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
        return _new(ScannedFile, (split, name, None, None, str(exc), -1))
    # A file as a session writes it, in line: UTF-8, one JSON object from its first character
    # holding every field, nothing but whitespace after it (what loads_utf8 takes without
    # json.loads). Anything else, or any doubt, is read again below, as before.
    try:
        text = raw.decode("utf-8")
        record, end = _SCAN_ONCE(text, 0)
        if end == len(text) or not text[end:].strip(_WHITESPACE):
            # (tuple.__new__: the NamedTuple's own __new__ is a Python frame per file)
            return _new(ScannedFile, (split, name, _VALUES_OF(record), None, None, len(raw)))
    except (ValueError, StopIteration, KeyError, TypeError):
        pass
    try:
        record = loads_utf8(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return ScannedFile(split, name, None, None, str(exc), len(raw))
    if not isinstance(record, dict):
        return ScannedFile(split, name, None, record, None, len(raw))
    try:
        return ScannedFile(split, name, _VALUES_OF(record), None, None, len(raw))
    except KeyError:  # a field missing: those it has
        return ScannedFile(split, name, None, {f: record[f] for f in FIELDS if f in record}, None, len(raw))


_new = tuple.__new__
_SCAN_ONCE = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads's parser (C)
_WHITESPACE = " \t\n\r"  # JSON's, not str.isspace's
_VALUES_OF = itemgetter(*FIELDS)


def _rest(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)
