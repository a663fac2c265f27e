"""The pipe between a scoring process and its sandbox child: frames, and answers read as data.

Both sides (:mod:`.sandbox` in the parent, :mod:`.sandbox_child` in the child) send pickled
frames, each an 8-byte length and its payload. The parent trusts nothing the child sends: the
child runs candidate code, which can write any bytes it likes on the pipe. So the parent reads
an answer with :class:`AnswerUnpickler`, which builds containers and scalars and only the
classes listed in :data:`VALUE_TYPES` (ours: :class:`.Rollout`) or defined in the harness's own
adapter module (already imported in the parent, locked with the run) — never a function, never
a module it would have to import. A pickle is a program; this one can only make values.
"""

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

VALUE_TYPES = frozenset(
    {
        ("pytest_capevolve._project.adapter", "Rollout"),
        ("builtins", "complex"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "bytearray"),
        ("builtins", "slice"),
        ("builtins", "range"),
        ("collections", "OrderedDict"),
        ("collections", "deque"),
        ("datetime", "date"),
        ("datetime", "datetime"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("decimal", "Decimal"),
        ("fractions", "Fraction"),
        ("uuid", "UUID"),
        ("pathlib", "PurePosixPath"),
        ("pathlib", "PosixPath"),
        ("pathlib._local", "PurePosixPath"),
        ("pathlib._local", "PosixPath"),
    }
)


class WireError(Exception):
    """The other side sent something that is not a frame, or not plain data."""


def frame(message: Any) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class FrameReader:
    """Reads whole frames from a pipe's file descriptor, with an optional deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()

    def read(self, deadline: float | None = None) -> bytes | None:
        """The next frame's payload; None at end of file (the other side is gone). Raises
        TimeoutError when ``deadline`` (``time.monotonic()``) passes first, WireError on a
        length no frame has."""
        buffer = self._buffer
        while True:
            if len(buffer) >= HEADER.size:
                (length,) = HEADER.unpack_from(buffer)
                if length > MAX_FRAME:
                    raise WireError(f"a frame of {length} bytes announced")
                end = HEADER.size + length
                if len(buffer) >= end:
                    payload = bytes(buffer[HEADER.size : end])
                    del buffer[:end]
                    return payload
            if deadline is not None:
                wait = deadline - time.monotonic()
                if wait <= 0 or not select.select([self.fd], [], [], wait)[0]:
                    raise TimeoutError
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return None
            buffer += chunk


class AnswerUnpickler(pickle.Unpickler):
    """Unpickles values only: see the module docstring."""

    def __init__(self, file: Any, harness_modules: Iterable[str]) -> None:
        super().__init__(file)
        self.harness_modules = frozenset(harness_modules)

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in VALUE_TYPES:
            return super().find_class(module, name)
        if module in self.harness_modules and module in sys.modules:
            found = getattr(sys.modules[module], name, None)
            if isinstance(found, type) and found.__module__ == module:
                return found
        raise WireError(f"{module}.{name} is not a value type the scoring process rebuilds")


def load_answer(payload: bytes, harness_modules: Iterable[str]) -> Any:
    """``payload`` as values (see :class:`AnswerUnpickler`); WireError for anything else."""
    try:
        return AnswerUnpickler(io.BytesIO(payload), harness_modules).load()
    except WireError:
        raise
    except Exception as exc:  # a truncated or garbled pickle, a refused reduce
        raise WireError(f"{type(exc).__name__}: {exc}") from None


def plain(value: Any) -> Any:
    """A JSON-able copy of ``value`` (non-JSON leaves become their repr), as records keep it."""
    if type(value) in (str, int, float, bool, type(None)):
        return value
    return json.loads(json.dumps(value, default=repr))
