"""The rollout index as a view of the log: how ``index.sqlite`` catches up, and is rebuilt.

Controller only, under the run's lock. Catching up reads only what was logged since the index
was current; a missing, damaged or orphaned index is rebuilt from the rollout files — logging,
on the way, files the log recorded that are gone. ``capevolve verify`` reads every rollout file once
(:func:`scan_rollouts`: each opened, parsed and hashed, with no stat), and the audit and the index
view both read that one scan."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from hashlib import sha256 as _sha256
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

from ..._project.splits import TEST_SPLIT
from ..files import READ_FLAGS, loads_utf8, read_plain_bytes
from ..log.event_kinds import ROLLOUT, ROLLOUT_QUARANTINED, ROLLOUT_VANISHED
from ..log.events import EventLog
from ..log.paid_by import moved_files
from .index import CHECKED, IndexDamaged, RolloutIndex, Row, row_of
from .index import FIELDS as FIELDS_INDEX
from .record import RecordError, RolloutRecord

VANISHED_SHOWN = 3  # files named in a vanish notice; more are counted, not listed
_INDEX_FIELDS = {
    ROLLOUT: ("kind", "seq", "split", "task_id", "tag", "trial"),
    ROLLOUT_QUARANTINED: ("kind", "file"),
    ROLLOUT_VANISHED: ("kind", "files"),
}


def _index_view(event: dict[str, Any]) -> dict[str, Any] | None:
    """What :meth:`IndexView.sync` holds of an event: the fields naming a file, of the kinds it reads."""
    fields = _INDEX_FIELDS.get(str(event.get("kind")))
    return None if fields is None else {key: event[key] for key in fields if key in event}


class IndexView:
    """``index.sqlite`` kept current with ``log`` (``run.rollouts.index_view``)."""

    def __init__(
        self,
        root: Path,
        log: EventLog,
        index: RolloutIndex,
        rollout_path: Callable[[str, str, str, int], Path],
        notices: list[str],
        read_files: Callable[[str], list[tuple[Path, RolloutRecord]]],
    ) -> None:
        self.root = root
        self.log = log
        self.index = index
        self.rollout_path = rollout_path
        self.notices = notices
        self.read_files = read_files
        self._scanned: dict[str, list[Scanned]] | None = None  # set by :meth:`reading`

    # -- a view of the log (:class:`..log.log_views.LogView`) ---------------------------------------

    @property
    def name(self) -> str:
        return self.index.path.name

    def catch_up(self) -> None:
        """Under the lock: :meth:`sync`; an index that cannot be is let go (the next reader rebuilds it)."""
        try:
            self.sync()
        except (IndexDamaged, OSError) as exc:
            self.index.close()
            self.notices.append(f"{self.index.path}: could not be brought up to date ({exc})")

    def check(self, events: list[dict[str, Any]], *, repair: bool) -> list[str]:
        """The index's rows against their files, caught up first (with ``repair``, rebuilt if need be)."""
        name = self.name
        if not repair and not self.index.path.exists():  # not even an empty one made: verify reads
            return [f"{name}: missing (the next session, or capevolve verify --repair, rebuilds it)"]
        try:
            with self.log.lock():
                self.sync(rebuild=repair)
            # the audit's one read of every file (a repair may rebuild the index and move damaged
            # files first: read again)
            scanned = self._scanned if self._scanned is not None and not repair else None
            if scanned is None:
                scanned = scan_rollouts(self.root).files
            return [
                problem
                for split, files in scanned.items()
                if split != TEST_SPLIT
                for problem in self._check_scanned(split, files)
            ]
        except IndexDamaged as exc:
            return [f"{name}: unusable ({exc})"]

    @contextlib.contextmanager
    def reading(self, scanned: dict[str, list[Scanned]]) -> Iterator[None]:
        """While inside, :meth:`check` compares the rows with the files as the audit read them."""
        self._scanned = scanned
        try:
            yield
        finally:
            self._scanned = None

    def _check_scanned(self, split: str, scanned: list[Scanned]) -> list[str]:
        """One split's rows against its files as scanned. The scan took no stat: a disagreeing row is
        reported only if its file's size and mtime, taken now, are still the row's (else readers
        read it again)."""
        name, problems = self.name, []
        fetched = sorted(self.index.checked(split))
        if fetched == scanned:  # the scan keeps a file as a session writes it in a row's layout
            return []
        files = {seen[0]: seen for seen in scanned}
        rows = {row[0]: row for row in fetched}
        mtimes: dict[str, int] | None = None
        for file in sorted(rows):
            row = rows[file]
            seen = files.get(file)
            if seen is None:
                problems.append(f"{name}: a {split} row for {file}, which is not on disk")
                continue
            if seen[1] != row[1]:
                continue  # the file changed since: readers read it again (checked above)
            data = data_of(seen, split)
            if error_of(seen) is not None or not isinstance(data, dict):
                continue  # reported above as unreadable
            said = tuple(map(data.get, CHECKED))
            if said == row[2:]:
                continue
            if mtimes is None:
                mtimes = {row[-3]: row[-1] for row in self.index.rows(split)}
            try:
                stat = os.stat(self.root / "rollouts" / split / file)
            except OSError:
                continue  # gone since it was read: the next reader finds it missing
            if (stat.st_size, stat.st_mtime_ns) != (row[1], mtimes.get(file)):
                continue  # the file changed since: readers read it again (checked above)
            for field, in_row, in_file in zip(CHECKED, row[2:], said, strict=True):
                if in_file != in_row:
                    problems.append(
                        f"{name}: {field} {in_row!r} for rollouts/{split}/{file}, "
                        f"but the file says {in_file!r}"
                    )
        return problems + [
            f"{name}: no row for rollouts/{split}/{file}" for file in sorted(set(files) - set(rows))
        ]

    def rebuild(self, problems: Sequence[str]) -> str:
        """Under the lock: a fresh index from every train and val rollout file."""
        self._rebuild_index("verify --repair")
        return f"{self.name}: rebuilt from the rollout files ({len(problems)} disagreement(s))"

    def sync(self, *, rebuild: bool = True) -> None:
        """Under the lock: catch the index up with the log (rows in, quarantined and vanished files
        out), or rebuild it when missing, damaged or behind a rewritten log. ``rebuild=False`` (a
        reader that must not write the run): :class:`IndexDamaged` instead, since a rebuild logs."""
        try:
            position = self.index.position()
            tail = None if position is None else self.log.events_after(*position, _index_view)
            if tail is None:
                problem = "missing" if position is None else "behind a rewritten events.jsonl"
                if not rebuild:
                    raise IndexDamaged(problem)
                self._rebuild_index(problem)
                return
            events, offset, seq = tail  # each event held through _index_view
            if (offset, seq) == position:
                return
            changes: dict[tuple[str, str], Row | None] = {}
            for event in events:
                if event.get("kind") == ROLLOUT and event.get("split") != TEST_SPLIT:
                    # the row this process made as it wrote the file names it (no path built again)
                    row = self.index.pending.pop(int(event["seq"]), None)
                    if row is None:
                        path = self.rollout_path(
                            event["split"], event["task_id"], event["tag"], event["trial"]
                        )
                        row, name = _row_from_file(path), path.name
                    else:
                        name = row[_NAME_AT]
                    changes[(str(event["split"]), name)] = row
                for file in moved_files(event):
                    changes[_split_file(file)] = None
            self.index.store(
                [row for row in changes.values() if row is not None],
                [key for key, row in changes.items() if row is None],
                (offset, seq),
            )
            self.index.pending.clear()
        except IndexDamaged as exc:
            if not rebuild:
                raise
            self._rebuild_index(f"damaged ({exc})")

    def _rebuild_index(self, problem: str) -> None:
        self.index.remove()
        rows = []
        folder = self.root / "rollouts"
        splits = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
        for split in (s for s in splits if not s.startswith(".") and s != TEST_SPLIT):
            for path, record in self.read_files(split):
                with contextlib.suppress(FileNotFoundError):
                    rows.append(row_of(record, path, path.stat()))
        self._log_gone_unindexed({tuple(row[i] for i in _KEY_AT) for row in rows})
        size, _, seq = self.log.tail()
        self.index.store(rows, [], (size, seq), replace_all=True)
        self.index.pending.clear()
        if rows:
            self.notices.append(f"{self.index.path}: {problem}; rebuilt from {len(rows)} rollout files")

    def _log_gone_unindexed(self, found: set[tuple[Any, ...]]) -> None:
        """For a rebuild: logged rollouts whose file is not among ``found`` were deleted by hand with
        no row left to notice — logged as vanished all the same, or the next session would pay them
        again unsaid and ``verify`` would count them paid twice for good."""

        def view(event: dict[str, Any]) -> Any:
            if event.get("kind") == ROLLOUT and event.get("split") != TEST_SPLIT:
                return (
                    int(event["seq"]),
                    event["split"],
                    event["task_id"],
                    event["tag"],
                    int(event["trial"]),
                )
            return (int(event["seq"]), files) if (files := moved_files(event)) else None

        log = self.log.events_after(0, 0, view)
        if log is None:  # a line that is not an event: verify names it; nothing to add here
            return
        recorded: dict[str, tuple[int, tuple[Any, ...]]] = {}  # file → (last rollout seq, key)
        moved: dict[str, int] = {}  # file → seq of its last quarantine or vanish
        for held in log[0]:
            if len(held) == 5:
                seq, split, task_id, tag, trial = held
                rel = self.rollout_path(split, task_id, tag, trial).relative_to(self.root).as_posix()
                recorded[rel] = (seq, (split, tag, task_id, trial))
            else:
                for file in held[1]:
                    moved[file] = held[0]
        gone = [
            rel
            for rel, (seq, key) in recorded.items()
            if key not in found and moved.get(rel, -1) < seq and not (self.root / rel).exists()
        ]
        log_vanished(self.log, self.notices, sorted(gone))


def log_vanished(log: EventLog, notices: list[str], files: list[str]) -> None:
    """Under the lock: recorded rollout files found gone, logged as ``rollout_vanished``, and one
    notice for them (a few named, the rest counted)."""
    if not files:
        return
    log.append_event(ROLLOUT_VANISHED, files=files)
    shown = ", ".join(files[:VANISHED_SHOWN])
    more = f" and {len(files) - VANISHED_SHOWN} more" if len(files) > VANISHED_SHOWN else ""
    if len(files) == 1:
        what = f"{shown}: recorded, but the file is gone"
    else:
        what = f"{len(files)} recorded rollout files are gone ({shown}{more})"
    notices.append(
        f"{what} (deleted by hand?); logged as rollout_vanished: treated as missing, so paid again"
    )


def _row_from_file(path: Path) -> Row | None:
    try:
        stat = path.stat()
        return row_of(RolloutRecord.loads(read_plain_bytes(path).decode("utf-8"), str(path)), path, stat)
    except (OSError, UnicodeDecodeError, RecordError):
        return None  # gone or damaged: a reader finds it (or not) on disk and handles it


def _split_file(file: str) -> tuple[str, str]:
    """``rollouts/<split>/<name>`` as the index's (split, file name)."""
    folder, _, name = file.removeprefix("rollouts/").partition("/")
    return folder, name


_KEY_AT = tuple(FIELDS_INDEX.index(name) for name in ("split", "tag", "task_id", "trial"))
_NAME_AT = len(FIELDS_INDEX)  # a row: the fields, then its file's name, size and mtime
_SCANNED = ("split", "task_id", "tag", "trial", "reward", "infra_error", "cost_usd")  # what an OddFile keeps
_OPEN_FLAGS = READ_FLAGS  # no link followed, no planted FIFO waited on
_READ_AT_ONCE = 1 << 16  # bytes asked of the first read of a file


class OddFile(NamedTuple):
    """A rollout file not as a session writes it: ``data`` the fields it holds, or the JSON value
    that is not an object, or None with ``error`` saying why it could not be read."""

    name: str
    size: int
    data: Any
    error: str | None


# A file as a session writes it is kept as one plain tuple laid out as the index's row for it
# (:meth:`.index.RolloutIndex.checked`): its name, its size, then CHECKED as the file says them,
# so the index's check compares a split's rows with these at once.
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
    return OddFile(name, len(raw), {f: record[f] for f in _SCANNED if f in record}, None)


_CHECKED_OF = itemgetter(*CHECKED)


def _rest(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)
