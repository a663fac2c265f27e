"""``index.sqlite``: what rollouts exist and how they came out, so readers need not open them.

A cache, never the record: one row per persisted train and val rollout (never test), caught up
from the point of the log it is current to, so a ``kill -9`` between a rollout's event and its row
loses nothing; each read checks rows against their files' size and mtime, and a missing, damaged
or foreign index is rebuilt from the files — never a crash. SQLite in WAL mode: readers never
block the writer, and a torn write cannot half-update it."""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from collections.abc import Iterable, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from .record import RolloutRecord

INDEX_NAME = "index.sqlite"
INDEX_SCHEMA = "1"
FIELDS = (
    "split",
    "tag",
    "task_id",
    "trial",
    "reward",
    "passed",
    "infra_error",
    "cost_usd",
    "tokens",
    "seconds",
    "seed",
    "candidate_hash",
    "run_id",
)
Row = tuple[Any, ...]  # FIELDS, then file name, size, mtime_ns
# the columns :meth:`RolloutIndex.every` shares between rows (their places are written out there)
assert (*FIELDS[:3], *FIELDS[11:13]) == ("split", "tag", "task_id", "candidate_hash", "run_id")
CHECKED = ("tag", "task_id", "trial", "reward", "infra_error", "cost_usd")  # as a file says them

_CREATE = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rollouts (
    split TEXT NOT NULL, tag TEXT NOT NULL, task_id TEXT NOT NULL, trial INTEGER NOT NULL,
    reward REAL, passed INTEGER, infra_error TEXT, cost_usd REAL NOT NULL, tokens INTEGER NOT NULL,
    seconds REAL NOT NULL, seed INTEGER NOT NULL, candidate_hash TEXT NOT NULL, run_id TEXT NOT NULL,
    file TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    PRIMARY KEY (split, tag, task_id, trial)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rollouts_by_file ON rollouts (split, file);
"""
_UPSERT = f"INSERT OR REPLACE INTO rollouts VALUES ({', '.join('?' * (len(FIELDS) + 3))})"


class IndexDamaged(Exception):
    """The index cannot be used as it is; it is rebuilt from the files."""


def row_of(record: RolloutRecord, path: Path | None = None, stat: os.stat_result | None = None) -> Row:
    """The record's row (read without the index, no ``path``: no file name, size or mtime)."""
    values = [getattr(record, name) for name in FIELDS]
    values[FIELDS.index("passed")] = None if record.passed is None else int(bool(record.passed))
    if path is None or stat is None:
        return (*values, "", -1, -1)
    return (*values, path.name, stat.st_size, stat.st_mtime_ns)


class IndexedRecord(RolloutRecord):
    """A record whose outcome fields read through to its index row (~90 bytes, not ~530: a reader
    of 60,000 rollouts holds all of them); the other fields are their defaults. It compares like
    any :class:`RolloutRecord`; ``dataclasses.replace`` gives a plain one."""

    __slots__ = ("_row",)
    _row: Row

    def __new__(cls, **fields: Any) -> RolloutRecord:  # type: ignore[misc]
        return RolloutRecord(**fields)  # dataclasses.replace: a plain record with the changes

    def __reduce__(self) -> tuple[Any, ...]:
        return (record_of, (self._row,))


def _outcome_field(at: int) -> property:
    return property(lambda record: record._row[at])


for _at, _name in enumerate(FIELDS):
    setattr(IndexedRecord, _name, _outcome_field(_at))
_PASSED = FIELDS.index("passed")
IndexedRecord.passed = property(  # type: ignore[assignment]
    lambda record: None if record._row[_PASSED] is None else bool(record._row[_PASSED])
)


def record_of(row: Row, *, _new: Any = object.__new__, _set: Any = object.__setattr__) -> RolloutRecord:
    """An :class:`IndexedRecord` on ``row`` (rows this code wrote from valid records)."""
    record: IndexedRecord = _new(IndexedRecord)
    _set(record, "_row", row)
    return record


_AT = {name: i for i, name in enumerate((*FIELDS, "file", "size", "mtime_ns"))}


class Columns:
    """Rows read as columns (``columns["reward"]``), each made on first ask: no object per row. Also
    (:meth:`picked`) columns already made, in the row's layout: then no row is made unless asked."""

    def __init__(self, rows: list[Row]) -> None:
        self._rows: list[Row] | None = rows
        self._source: tuple[Sequence[list[Any]], list[int] | None] = ((), None)
        self._size = len(rows)
        self._made: dict[str, list[Any]] = {}

    @classmethod
    def picked(cls, columns: Sequence[list[Any]], at: list[int] | None) -> Columns:
        """The rows at the places ``at`` (None: every row, in order) of ``columns``, each a list in
        :data:`_AT`'s layout (read, never changed: every column asked is a copy)."""
        made = cls([])
        made._rows, made._source = None, (columns, at)
        made._size = len(columns[0]) if at is None and columns else len(at or ())
        return made

    @property
    def rows(self) -> list[Row]:
        if self._rows is None:
            self._rows = list(zip(*(self[name] for name in _AT), strict=True)) if self._size else []
        return self._rows

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, name: str) -> list[Any]:
        made = self._made.get(name)
        if made is None:
            if self._rows is not None:
                made = list(map(itemgetter(_AT[name]), self._rows))
            else:
                column, at = self._source[0][_AT[name]], self._source[1]
                made = list(column) if at is None else list(map(column.__getitem__, at))
            self._made[name] = made
        return made


class RolloutIndex:
    """The SQLite file and the rows this process wrote that it has not yet stored."""

    def __init__(self, root: Path) -> None:
        self.path = root / INDEX_NAME
        self._db: sqlite3.Connection | None = None
        self.pending: dict[int, Row] = {}  # event seq → row, for rollouts this process logged
        self._every: tuple[str, list[Row]] | None = None  # rows_version → every train and val row

    def connect(self) -> sqlite3.Connection:
        """The open index, created if absent; :class:`IndexDamaged` if it is not ours or unreadable."""
        if self._db is None:
            try:
                db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_CREATE)
                schema = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                if schema is None:
                    db.execute("INSERT INTO meta VALUES ('schema', ?)", (INDEX_SCHEMA,))
                elif schema[0] != INDEX_SCHEMA:
                    db.close()
                    raise IndexDamaged(f"schema {schema[0]!r}, not {INDEX_SCHEMA!r}")
            except sqlite3.DatabaseError as exc:
                raise IndexDamaged(str(exc)) from None
            self._db = db
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._every = None

    def remove(self) -> None:
        """Delete the index file (and its WAL): it is rebuilt from the rollout files."""
        self.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _select(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """The rows a read returns; any database error is :class:`IndexDamaged` (then rebuilt)."""
        try:
            return self.connect().execute(query, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise IndexDamaged(str(exc)) from None

    def rows_version(self) -> str:
        """A token any process's change of the rows renews: what caches of checked rows key on."""
        found = self._select("SELECT value FROM meta WHERE key = 'rows_version'")
        return str(found[0][0]) if found else ""

    def position(self) -> tuple[int, int] | None:
        """(byte offset, seq) of ``events.jsonl`` the index is current to; None: never synced."""
        rows = dict(self._select("SELECT key, value FROM meta"))
        if "events_offset" not in rows:
            return None
        return int(rows["events_offset"]), int(rows["events_seq"])

    def store(
        self,
        upserts: Iterable[Row],
        deletes: Iterable[tuple[str, str]],
        position: tuple[int, int] | None,
        *,
        replace_all: bool = False,
    ) -> None:
        """One transaction: (split, file) rows out, rows in, the new log position (None: it stays)."""
        db = self.connect()
        upserts, deletes = list(upserts), list(deletes)
        try:
            db.execute("BEGIN IMMEDIATE")
            if replace_all:
                db.execute("DELETE FROM rollouts")
            db.executemany("DELETE FROM rollouts WHERE split = ? AND file = ?", deletes)
            db.executemany(_UPSERT, upserts)
            if upserts or deletes or replace_all:  # any process's reader sees the rows moved
                db.execute("INSERT OR REPLACE INTO meta VALUES ('rows_version', ?)", (secrets.token_hex(8),))
            if position is not None:
                db.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [("events_offset", str(position[0])), ("events_seq", str(position[1]))],
                )
            db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.DatabaseError):
                db.execute("ROLLBACK")
            raise IndexDamaged(str(exc)) from None

    def rows(self, split: str, tags: Iterable[str] | None = None) -> list[Row]:
        """The split's rows (of ``tags`` only, if given), in key order."""
        wanted = None if tags is None else set(tags)
        return [row for row in self.every() if row[0] == split and (wanted is None or row[1] in wanted)]

    def every(self) -> list[Row]:
        """Every train and val row in key order, read once per :meth:`rows_version`, values shared."""
        version = self.rows_version()
        if self._every is None or self._every[0] != version:
            self._every, o = None, dict[Any, Any]().setdefault  # the old rows go before the new are read
            query = "SELECT * FROM rollouts WHERE split != 'test' ORDER BY split, tag, task_id, trial"
            try:  # each row's values named by the loop, not sliced and starred: a fifth less per read
                rows = [
                    (o(a, a), o(b, b), o(c, c), d, e, f, g, h, i, j, k, o(x, x), o(m, m), n, o(p, p), q)
                    for a, b, c, d, e, f, g, h, i, j, k, x, m, n, p, q in self.connect().execute(query)
                ]
            except (sqlite3.DatabaseError, ValueError) as exc:  # ValueError: a row not of our columns
                raise IndexDamaged(str(exc)) from None
            self._every = (version, rows)
        return self._every[1]

    def checked(self, split: str) -> list[tuple[Any, ...]]:
        """The split's rows as (file, size, *:data:`CHECKED`): what ``verify`` compares with the files."""
        columns = ", ".join(("file", "size", *CHECKED))
        return self._select(f"SELECT {columns} FROM rollouts WHERE split = ?", (split,))

    def tags(self, split: str) -> set[str]:
        return {row[1] for row in self.every() if row[0] == split}
