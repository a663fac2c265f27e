"""The sealed summary: ``rollouts.summary.json``, the train and val rows a resume with nothing owed
reads instead of fetching 60,000 index rows and holding each to its file and the log's checkpoint.

Written by the session that keeps the record, as it leaves (after its last rollout append, under the
run's lock), from rows it has just held to the log's outcomes and their files' size and mtime. Its
sha256 is a field of a line of the hash chain (``rollouts_summarized``, followed by a ``session_left``
line recording that line's hash), as the outcomes' checkpoint digest is: the line says *which* log
and which bytes, and it sits in the chain where it says it is. JSON only (never pickle: the run dir
is writable by whoever runs unconfined).

It serves a reader only while all of these hold, each checked by the reader before its first use and
the cheap ones again at every use; anything else and the reader takes the full path (the index, each
row held to its file and the log), as it always did:

- its line is linked where it says it is and is the newest ``rollouts_summarized`` line;
- no ``rollout``, ``rollout_quarantined`` or ``rollout_vanished`` line follows it (a rollout logged
  by any process, a file moved aside or found gone);
- its bytes are the sha256 its line records, and it names that line's place in the log;
- each split's folder is the one it saw: inode, mtime and ctime. Adding, removing or renaming a file
  moves the folder's ctime, which ``os.utime`` cannot set back, so a file deleted or replaced by
  another is seen and paid again exactly as before.

It also keeps the keys of the leak screens that found nothing (``screens``: each a digest of the
candidate's and its parent's bytes, the task pool, the guarded ids and the screen's own code,
:func:`..._project.leak.screen_key`), so a resume does not rebuild the needles of every task to
screen again bytes it screened before; a key serves only while the summary holds, like its rows.

What it does not see: a file edited in place (the folder does not move). That is left to the readers
of a file's bytes, each of which holds them to their ``rollout`` event's sha256 before use
(:meth:`..rollouts.rollout_readback.RolloutReadBack._read_one`, the judge's ``HeldToEvents``,
``capevolve verify``); the outcomes every decision reads are the summary's rows, bound to the log."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from array import array
from binascii import a2b_base64, b2a_base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..files import atomic_write_text, read_plain_bytes
from .event_kinds import ROLLOUTS_SUMMARIZED, SESSION_LEFT
from .events import EventLog
from .outcome_ledger import rollout_view

SUMMARY_NAME = "rollouts.summary.json"
SUMMARY_FORMAT = 2  # 2: columns packed (1, plain JSON lists, serves nothing: the full path once)
SUMMARIZED_SPLITS = ("train", "val")  # test is in no index: read only through the seal
Row = tuple[Any, ...]


def folder_stamp(folder: Path) -> list[int] | None:
    """What an entry added, removed or renamed in ``folder`` moves (None: no folder)."""
    try:
        found = os.stat(folder)
    except FileNotFoundError:
        return None
    return [found.st_dev, found.st_ino, found.st_mtime_ns, found.st_ctime_ns]


class SealedSummary:
    """The run's sealed summary: :meth:`rows` while it holds, :meth:`write` as the record keeper leaves."""

    def __init__(self, root: Path, log: EventLog) -> None:
        self.root = root
        self.path = root / SUMMARY_NAME
        self.log = log
        self._held: tuple[str, list[list[Any]]] | None = None  # (rows version, its columns) as loaded
        self._rows: list[Row] | None = None  # the held columns as rows, made on first ask
        self._position = (0, 0)  # the log checked up to: no rollout line before it
        self._folders: dict[str, list[int] | None] = {}
        self._spent = False  # found not to hold in this process: what moved it stays moved
        self._screens: frozenset[str] = frozenset()  # as loaded: the leak screens that found nothing
        self._screened: set[str] = set()  # found clean in this process: written with the next summary

    def _folder(self, split: str) -> Path:
        return self.root / "rollouts" / split

    def rows(self) -> tuple[str, list[Row]] | None:
        """(the index's rows version it was written at, every train and val row in key order), or
        None: no summary, or it does not hold (the caller takes the full path)."""
        served = self.columns()
        if served is None:
            return None
        if self._rows is None:
            # the lengths were checked at load: a strict zip of the held columns cannot fail
            self._rows = list(zip(*served[1], strict=True)) if served[1] else []
        return served[0], self._rows

    def columns(self) -> tuple[str, list[list[Any]]] | None:
        """What :meth:`rows` serves, as columns in the row's layout (read only: shared by every reader),
        under the same checks: no row is made for a reader of a few columns."""
        if self._spent:
            return None
        if self._held is None:
            self._held = self._load()
        if self._held is not None and self._holds():
            return self._held
        self._spent, self._held, self._rows = True, None, None
        return None

    def _holds(self) -> bool:
        """No rollout line since the place checked, and every split's folder as it saw it."""
        tail = self.log.events_after(*self._position, rollout_view)
        if tail is None or tail[0]:
            return False
        self._position = tail[1], tail[2]
        return all(folder_stamp(self._folder(split)) == stamp for split, stamp in self._folders.items())

    def _load(self) -> tuple[str, list[list[Any]]] | None:
        lines = self.log.of_kinds(ROLLOUTS_SUMMARIZED)
        if not lines:
            return None
        line: dict[str, Any] = dict(lines[-1])
        if not self.log.linked(line):  # copied later in the log, or no line records its hash
            return None
        try:
            raw = read_plain_bytes(self.path)
        except OSError:
            return None
        if hashlib.sha256(raw).hexdigest() != line.get("sha256"):
            return None
        try:
            found = json.loads(raw)
            if not (
                found["format"] == SUMMARY_FORMAT
                and found["offset"] == line["offset"]
                and found["upto"] == line["upto"]
            ):
                return None
            folders = {str(split): stamp for split, stamp in found["folders"].items()}
            version = str(found["rows_version"])
            columns = [_decoded(column) for column in found["columns"]]
            screens = frozenset(str(key) for key in found.get("screens", []))
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            return None
        # as many rows as its line says, each column one value a row (what a strict zip of them held)
        lengths = {len(column) for column in columns} if columns else {0}
        if lengths != {line.get("rollouts")} or set(folders) != set(SUMMARIZED_SPLITS):
            return None
        self._position, self._folders = (int(line["offset"]), int(line["upto"])), folders
        self._screens = screens
        return version, columns

    def screened_clean(self, key: str) -> bool:
        """Whether a leak screen of ``key`` found nothing, by the summary while it holds (never else)."""
        return key in self._screened or (self.rows() is not None and key in self._screens)

    def note_clean(self, key: str) -> None:
        """A leak screen of ``key`` found nothing: kept with the summary the record keeper writes next."""
        self._screened.add(key)

    def screens_to_seal(self) -> bool:
        """Whether this process found a screen clean that the summary does not hold yet."""
        return bool(self._screened - self._screens)

    def stamps(self) -> dict[str, list[int] | None]:
        """Each split folder's stamp, taken before the rows are held to their files (what :meth:`write`
        binds: anything moved after it moves the stamp)."""
        return {split: folder_stamp(self._folder(split)) for split in SUMMARIZED_SPLITS}

    def write(self, rows: Sequence[Row], rows_version: str, stamps: dict[str, list[int] | None]) -> None:
        """Under the run's lock, after the session's last rollout append: the summary of ``rows``
        (every train and val row, just held to the log and their files; ``stamps`` taken before),
        then its chained line and a line after it recording that line's hash. An ``OSError`` leaves
        no line: nothing serves."""
        size, _, seq = self.log.tail()
        width = len(rows[0]) if rows else 0
        summary = {
            "format": SUMMARY_FORMAT,
            "offset": size,
            "upto": seq,
            "rows_version": rows_version,
            "folders": stamps,
            "columns": [_encoded([row[at] for row in rows]) for at in range(width)],
            "screens": sorted(self._screens | self._screened),
        }
        text = json.dumps(summary, separators=(",", ":"), allow_nan=False)
        atomic_write_text(self.path, text)
        self.log.append_event(
            ROLLOUTS_SUMMARIZED,
            offset=size,
            upto=seq,
            rollouts=len(rows),
            sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        )
        self.log.append_event(SESSION_LEFT, checkpoint=self.log.last_seq())


def _encoded(column: list[Any]) -> list[Any] | dict[str, Any]:
    """A column as a reader decodes it fastest, every value exactly as written: few distinct values
    of one kind (or None) as those values and each row's place among them; whole numbers, or finite
    floats, as 8 bytes each (a float's bits: ``-0.0`` stays ``-0.0``); anything else (file names) as
    it is. Packed numbers are little-endian bytes in base64, ``{typecode: text}``."""
    # equal values share a key (1 and 1.0, 0.0 and -0.0): told apart below
    at: dict[Any, Any] = dict.fromkeys(column)
    kinds = set(map(type, column)) - {type(None)}
    if len(at) * 4 <= len(column) and len(kinds) <= 1 and kinds <= {str, int, float}:
        if kinds != {float} or not any(math.copysign(1.0, v) < 0 for v in column if v == 0):
            for i, value in enumerate(at):
                at[value] = i
            places = array("B" if len(at) <= 256 else "I", map(at.__getitem__, column))
            return {"of": list(at), "at": _packed(places)}
    if column and all(type(value) is int and -(2**63) <= value < 2**63 for value in column):
        return {"packed": _packed(array("q", column))}
    if column and all(type(value) is float for value in column) and all(map(math.isfinite, column)):
        return {"packed": _packed(array("d", column))}
    return column  # a float that is not finite: refused by the JSON, as it always was


def _decoded(column: Any) -> list[Any]:
    if isinstance(column, list):
        return column
    if "of" in column:
        values, places = column["of"], _unpacked(column["at"], "BI")
        if len(values) == 1 and places.count(0) == len(places):  # one value (a split, a run id)
            return [values[0]] * len(places)
        return list(map(values.__getitem__, places))
    return _unpacked(column["packed"], "qd").tolist()


def _packed(values: array[Any]) -> dict[str, str]:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return {values.typecode: b2a_base64(values.tobytes(), newline=False).decode("ascii")}


def _unpacked(packed: dict[str, str], codes: str) -> array[Any]:
    ((code, text),) = packed.items()
    if code not in codes:
        raise ValueError(f"a packed column of {code!r}")
    values = array(code)
    values.frombytes(a2b_base64(text))
    if sys.byteorder == "big":
        values.byteswap()
    return values
