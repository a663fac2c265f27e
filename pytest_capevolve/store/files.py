"""Atomic writes and the run dir's lock: a crash at any instant leaves a file old or new.

Every write goes to a temp file in the same folder and is renamed over the target; the lock is
an ``flock`` on ``.lock`` in the run dir, re-entrant within one :class:`RunLock`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _umask_mode() -> int:
    """0666 less the process umask: the mode ``open()`` would give a new file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


FILE_MODE = _umask_mode()


class RunDirError(Exception):
    """The run dir cannot be used as asked; the message names the file and what to do instead."""


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp's 0600 would make run dirs unreadable as CI artifacts
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, dump_json(obj))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@contextlib.contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``lock_file`` (created if needed) for the ``with`` block; the
    kernel drops it if the holder dies."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class RunLock:
    """Exclusive across processes; re-entrant within this object, so a compound update
    (rollout + spend + event) takes the lock once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._depth = 0

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            self._depth = 1
            try:
                yield
            finally:
                self._depth = 0
                fcntl.flock(handle, fcntl.LOCK_UN)
