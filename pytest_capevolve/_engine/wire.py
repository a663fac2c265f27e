"""The pipe between a scoring process and its sandbox child: frames, and answers read as data.

Frames are an 8-byte length and a pickle. Candidate code can write any bytes on the pipe, so
the parent reads answers with :class:`AnswerUnpickler`, which builds only containers, scalars,
:data:`VALUE_TYPES` and the harness adapter module's classes: a pickle is a program; this one can
only make values. On the hot path an answer is a tuple then the rollout's own pickle in one
frame, written in one ``writev`` and read straight into the buffer it is parsed from."""

from __future__ import annotations

import io
import json
import os
import pickle
import select
import struct
import sys
import time
from collections.abc import Iterable
from typing import Any

HEADER = struct.Struct("!Q")
MAX_FRAME = 1 << 30  # a length past this is a broken (or hostile) child, not a rollout
CHUNK = 1 << 16  # what one read asks for while a frame's header is not in yet

VALUE_TYPES = frozenset(
    (module, name)
    for module, names in {
        "pytest_capevolve._project.adapter": ("Rollout",),
        "builtins": ("complex", "set", "frozenset", "bytearray", "slice", "range"),
        "collections": ("OrderedDict", "deque"),
        "datetime": ("date", "datetime", "time", "timedelta", "timezone"),
        "decimal": ("Decimal",),
        "fractions": ("Fraction",),
        "uuid": ("UUID",),
        "pathlib": ("PurePosixPath", "PosixPath"),
        "pathlib._local": ("PurePosixPath", "PosixPath"),
    }.items()
    for name in names
)


# A request, parent to child: a tuple of these fields (the child trusts its parent's pickles).
REQUEST_FIELDS = ("id", "task_id", "task", "dir", "seed", "split", "timeout_s", "log_level", "inline")
# its ``task``: the task's pickle the first time this child is sent it, SAME_TASK after that, or
# None when it does not pickle (the child takes the same task from its own ``tasks("all")``)
SAME_TASK = 0
# An answer, child to parent: one frame holding this tuple's pickle and, when its last field is
# True, the rollout's own pickle right after it (never a pickle inside a pickle: copied once).
ANSWER_FIELDS = ("id", "infra_error", "stdout", "stderr", "records", "has_rollout")


class WireError(Exception):
    """The other side sent something that is not a frame, or not plain data."""


def dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def frame(message: Any) -> bytes:
    payload = dumps(message)
    return HEADER.pack(len(payload)) + payload


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_frame(fd: int, *parts: bytes) -> None:
    """One frame whose payload is ``parts`` joined (:func:`write_frames`)."""
    write_frames(fd, [parts])


def write_frames(fd: int, frames: Iterable[tuple[bytes, ...]]) -> None:
    """Frames, each a payload of parts joined, written without joining them: a header and the
    parts of each in one ``writev``; only after a partial write (rare) is the rest joined and written."""
    pieces: list[bytes] = []
    for parts in frames:
        size = sum(map(len, parts))
        if size > MAX_FRAME:
            raise ValueError(f"a frame of {size} bytes is longer than any answer may be")
        pieces += (HEADER.pack(size), *parts)
    written = os.writev(fd, pieces)
    if written < sum(map(len, pieces)):
        write_all(fd, b"".join(pieces)[written:])


class FrameReader:
    """Reads whole frames from a pipe's file descriptor, with an optional deadline. ``nonblocking``
    (the scoring process's end of a child's pipe): the descriptor is made non-blocking and read
    first, waited on only when nothing is there, so an answer already written (a request sent
    ahead) costs one read, not a ``poll`` and a read."""

    def __init__(self, fd: int, *, nonblocking: bool = False) -> None:
        self.fd = fd
        self.nonblocking = nonblocking
        if nonblocking:
            os.set_blocking(fd, False)
        self._buffer = bytearray()
        self._ready: select.poll | None = None  # made at the first wait

    def _wait(self, deadline: float | None) -> None:
        """Until the descriptor has something to read; TimeoutError once ``deadline`` passes. A
        blocking descriptor without a deadline is not waited on here: its read waits."""
        if deadline is None and not self.nonblocking:
            return
        if self._ready is None:
            # poll, not select: select refuses a descriptor ≥ 1024, which a long-lived process
            # holding many files (an in-process pytester suite, many children) reaches
            self._ready = select.poll()
            self._ready.register(self.fd, select.POLLIN)
        if deadline is None:
            self._ready.poll()
            return
        wait = deadline - time.monotonic()
        if wait <= 0 or not self._ready.poll(wait * 1000):
            raise TimeoutError

    def _read(self, deadline: float | None) -> bytes:
        """One read of what is there (b"" at end of file), waited for under ``deadline``."""
        if not self.nonblocking:
            self._wait(deadline)
            return os.read(self.fd, CHUNK)
        while True:
            try:
                return os.read(self.fd, CHUNK)
            except BlockingIOError:
                self._wait(deadline)

    def _read_into(self, view: memoryview, deadline: float | None) -> int:
        if not self.nonblocking:
            self._wait(deadline)
            return os.readv(self.fd, [view])
        while True:
            try:
                return os.readv(self.fd, [view])
            except BlockingIOError:
                self._wait(deadline)

    def read(self, deadline: float | None = None) -> bytes | None:
        """The next frame's payload; None at end of file (the other side is gone). Raises TimeoutError
        when ``deadline`` (``time.monotonic()``) passes first, WireError on a length no frame has."""
        buffer = self._buffer
        while len(buffer) < HEADER.size:
            chunk = self._read(deadline)
            if not chunk:
                return None
            buffer += chunk
        (length,) = HEADER.unpack_from(buffer)
        if length > MAX_FRAME:
            raise WireError(f"a frame of {length} bytes announced")
        end = HEADER.size + length
        if len(buffer) < end:  # the rest is read into its place, not through chunks
            whole = bytearray(end)
            have = len(buffer)
            whole[:have] = buffer
            self._buffer = buffer = whole
            view = memoryview(whole)
            try:
                while have < end:
                    with view[have:] as rest:  # released here, even when a wait raises through it
                        got = self._read_into(rest, deadline)
                    if not got:
                        break
                    have += got
            finally:
                view.release()
                if have < end:  # end of file, a deadline or an error: what came stays
                    del whole[have:]
            if have < end:
                return None
        with memoryview(buffer) as view:
            payload = bytes(view[HEADER.size : end])
        del buffer[:end]
        return payload


class AnswerUnpickler(pickle.Unpickler):
    """Unpickles values only: see the module docstring."""

    harness: frozenset[str] = frozenset()  # set by :class:`ValueLoader` on a subclass

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in VALUE_TYPES:
            return super().find_class(module, name)
        if module in self.harness and module in sys.modules:
            found = getattr(sys.modules[module], name, None)
            if isinstance(found, type) and found.__module__ == module:
                return found
        raise WireError(f"{module}.{name} is not a value type the scoring process rebuilds")


class ValueLoader:
    """Answers read as values (:class:`AnswerUnpickler`) for one set of harness modules: the
    unpickler's class is bound to them, so reading an answer builds no set and runs no Python ``__init__``."""

    def __init__(self, harness_modules: Iterable[str]) -> None:
        bound = {"harness": frozenset(harness_modules)}
        self._unpickler = type("BoundAnswerUnpickler", (AnswerUnpickler,), bound)

    def load(self, payload: bytes) -> Any:
        values = self.load_all(payload, 1)
        if not values:
            raise WireError("an empty frame")
        return values[0]

    def load_all(self, payload: bytes, most: int) -> list[Any]:
        """The values of the (at most ``most``) pickles written back to back in ``payload``;
        WireError for anything else, bytes left over included."""
        stream = io.BytesIO(payload)
        values: list[Any] = []
        try:
            while len(values) < most and stream.tell() < len(payload):
                # an unpickler per pickle: each numbers its memo from 0, and one unpickler's
                # memo would carry the last pickle's objects into the next one's references
                values.append(self._unpickler(stream).load())
        except WireError:
            raise
        except Exception as exc:  # a truncated or garbled pickle, a refused reduce
            raise WireError(f"{type(exc).__name__}: {exc}") from None
        if stream.tell() != len(payload):
            raise WireError("bytes after the answer's last value")
        return values


def plain(value: Any) -> Any:
    """A JSON-able copy of ``value`` (non-JSON leaves become their repr), as records keep it."""
    if type(value) in (str, int, float, bool, type(None)):
        return value
    return json.loads(json.dumps(value, default=repr))
