"""Atomic writes, JSON reads and the run dir's lock: a crash at any instant leaves a file old or new.

Writes go to a temp file in the same folder, renamed over the target; the lock is an ``flock`` on
``.lock``, re-entrant within one :class:`RunLock`. One exception, :func:`write_new_text`: a file
that did not exist, written once under its final name, for a caller whose record says afterwards
whether it is whole (a rollout file: its event, appended after it, carries its sha256)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import itertools
import json
import os
import stat as stat_mode
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..exitcodes import CapevolveError


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


FILE_MODE = _umask_mode()


class RunDirError(CapevolveError):
    """The run dir cannot be used as asked; the message names the file and what to do instead."""


_NO_INHERIT = getattr(os, "O_CLOEXEC", 0)
# This process's id for temp names, kept: asked of the kernel once per process, not per temp file; a
# child made with os.fork learns its own. One forked by C code (no at-fork hook) keeps its parent's:
# harmless for a name (O_EXCL takes the next), not for the lock, which asks the kernel each time
_PID = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


def pid() -> int:
    """``os.getpid()``, without a system call after the first (for temp names only)."""
    return _PID[0]


_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_INHERIT | getattr(os, "O_NOFOLLOW", 0)
_temp_numbers = itertools.count()  # next() is atomic: threads of one process never share a name


def _open_temp(path: Path) -> tuple[int, str]:
    """A new temp file beside ``path`` with the mode ``open()`` gives (mkstemp's 0600 would make run
    dirs unreadable as CI artifacts)."""
    while True:
        tmp = f"{path.parent}{os.sep}.{path.name}.{pid()}-{next(_temp_numbers)}.tmp"
        try:
            return _create(tmp, path.parent), tmp
        except FileExistsError:  # left by a dead process that had this pid: take the next number
            continue


def _create(path: str | Path, folder: Path) -> int:
    """``path`` created exclusively (O_EXCL: never a symlink followed, never a file reused), its
    ``folder`` made on first need; FileExistsError when something is there."""
    while True:
        try:
            return os.open(path, _TEMP_FLAGS, FILE_MODE)
        except FileNotFoundError:
            folder.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[int]:
    """A temp file beside ``path``, renamed over it when the block ends, removed if it raises."""
    fd, tmp = _open_temp(path)
    try:
        try:
            yield fd
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    while written < len(data):
        written += os.write(fd, data[written:])


def atomic_write_text(path: Path, text: str) -> os.stat_result:
    with _replacing(path) as fd:
        _write_all(fd, text.encode("utf-8"))
        stat = os.fstat(fd)
    return stat


def write_new_text(path: Path, text: str) -> os.stat_result | None:
    """Create ``path`` exclusively and write ``text`` to it, under its final name: no temp file, no
    rename (a rename and a directory entry fewer per file: 47 → 31 µs CPU per file written, measured
    on ext4). None when ``path`` exists: the caller replaces it with :func:`atomic_write_text`, so
    what was there stays whole.

    A crash before the last byte leaves a partial file under the final name, which no event records:
    only a caller that appends the file's record (its sha256) after this returns may write this way,
    and its readers must refuse a file its record does not vouch for. A write that fails removes
    the file it created."""
    try:
        fd = _create(path, path.parent)
    except FileExistsError:
        return None
    try:
        try:
            _write_all(fd, text.encode("utf-8"))
            return os.fstat(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        raise


# a file read back from the run dir: never through a link planted under its name, never waiting
# for a writer of a FIFO planted there (a regular file reads the same)
READ_FLAGS = os.O_RDONLY | _NO_INHERIT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)


def read_plain_bytes(path: Path | str) -> bytes:
    """The bytes of the regular file at ``path``; OSError for anything else there (a link, a FIFO, a
    folder): what an unconfined shell planted at a rollout's name is refused, never followed or
    waited on."""
    fd = os.open(path, READ_FLAGS)
    try:
        if not stat_mode.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


WRITE_CHUNK = 1 << 20  # bytes gathered before each write of a page written in pieces


def atomic_write_parts(path: Path, parts: Iterable[str]) -> None:
    """Write ``parts`` atomically, each drawn as the ones before are written (never held whole)."""
    with _replacing(path) as fd:
        pending: list[str] = []
        size = 0
        for part in parts:
            pending.append(part)
            size += len(part)
            if size >= WRITE_CHUNK:
                _write_all(fd, "".join(pending).encode("utf-8"))
                pending, size = [], 0
        _write_all(fd, "".join(pending).encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def unwritable_folder(folder: Path) -> OSError | None:
    """Why nothing can be written in ``folder``, or None (tried: ``os.access`` ignores a full disk)."""
    probe = folder / f".write-probe.{os.getpid()}.tmp"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except OSError as exc:
        return exc
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def stat_or_none(path: Path | str) -> os.stat_result | None:
    with contextlib.suppress(FileNotFoundError):
        return os.stat(path)
    return None


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# One JSON value from a file's text or a log line as ``json.loads`` reads it, but cheaper per call:
# the C scanner is called directly where the text is one value from its first character; anything
# else goes to ``json.loads``, so the value or error is word for word the same.
SCAN_ONCE = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads's parser (C)
_WHITESPACE = " \t\n\r"  # JSON's, not str.isspace's


def loads_text(text: str) -> Any:
    try:
        value, end = SCAN_ONCE(text, 0)
    except (StopIteration, ValueError):  # leading whitespace, or not JSON: json.loads says
        return json.loads(text)
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return json.loads(text)  # extra data after the value: its error
    return value


def loads_utf8(raw: bytes) -> Any:
    return loads_text(raw.decode("utf-8"))


def loads_bytes(raw: bytes) -> Any:
    """``json.loads(raw)``: a value opening with ``{"`` is UTF-8 to its encoding detection."""
    if raw[:2] == b'{"':
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return json.loads(raw)
        return loads_text(text)
    return json.loads(raw)


def read_run_json(path: Path, fix: str, data: bytes | None = None) -> Any:
    """:func:`read_json` (of ``data``, the file's bytes already read, if given); a damaged file raises
    :class:`RunDirError` naming it and ``fix``."""
    try:
        return read_json(path) if data is None else json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise RunDirError(f"{path}: damaged, not readable JSON ({exc}); {fix}") from None


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic collection inside (a run read whole makes no cycles to find); then as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


READ_ONLY_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)  # what a write to a read-only run dir raises
_LOCK_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NO_INHERIT


class KeptFd:
    """A descriptor kept open by the process that opened it (a forked child's copy is its parent's:
    never closed by the child), with the file it was opened on."""

    __slots__ = ("fd", "file", "pid")

    def __init__(self, fd: int) -> None:
        stat = os.fstat(fd)
        self.fd, self.file, self.pid = fd, (stat.st_dev, stat.st_ino), os.getpid()

    def names(self, stat: os.stat_result | None) -> bool:
        """Whether the path's ``stat`` is still this descriptor's file, in the process that opened it."""
        return stat is not None and (stat.st_dev, stat.st_ino) == self.file and self.pid == os.getpid()

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0 and self.pid == os.getpid():
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit the os module may be gone
            self.close()


class RunLock:
    """Exclusive across processes, re-entrant within this object. The descriptor stays open; after
    each ``flock`` the path must still name the locked file, and a forked child opens its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = f"{root}{os.sep}.lock"
        self._depth = 0
        self._kept: KeptFd | None = None

    def __call__(self) -> RunLock:
        return self

    def __enter__(self) -> None:
        if self._depth:
            self._depth += 1
            return
        while True:
            kept = self._descriptor()
            fcntl.flock(kept.fd, fcntl.LOCK_EX)
            if kept.names(stat_or_none(self.path)):
                self._depth = 1
                return
            fcntl.flock(kept.fd, fcntl.LOCK_UN)  # the path names another file now: lock that one
            self.close()

    def __exit__(self, *exc_info: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._kept is not None:
            fcntl.flock(self._kept.fd, fcntl.LOCK_UN)

    def _descriptor(self) -> KeptFd:
        if self._kept is not None and self._kept.pid == os.getpid():
            return self._kept
        self._kept = None  # a forked child's copy is its parent's: left alone
        try:
            fd = os.open(self.path, _LOCK_FLAGS, FILE_MODE)
        except FileNotFoundError:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, _LOCK_FLAGS, FILE_MODE)
        except OSError as exc:
            if exc.errno not in READ_ONLY_ERRNOS:
                raise
            # a read-only run dir (a CI artifact, chmod -R a-w): a read-only descriptor locks as
            # well, so readers that take the lock (verify, measure) still read a consistent run;
            # a writer's own write then says why it cannot
            fd = os.open(self.path, os.O_RDONLY | _NO_INHERIT)
        self._kept = KeptFd(fd)
        return self._kept

    def close(self) -> None:
        if not self._depth and self._kept is not None:
            self._kept.close()
            self._kept = None
