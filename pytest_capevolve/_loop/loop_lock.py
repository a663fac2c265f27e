"""One loop per project at a time.

Two hill-climbs on one project delete each other's work copies and pay an optimizer twice. A
loop holds ``.capevolve/loop.lock`` (an ``flock``, released when its process dies) while it
runs; a second loop is refused in one line naming the first."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from .._store.rundir import RUNS_DIR
from ..exitcodes import Refusal

LOCK_NAME = "loop.lock"


@contextlib.contextmanager
def only_loop(project_dir: Path) -> Iterator[None]:
    path = project_dir / RUNS_DIR.parent / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "{}"
            with contextlib.suppress(ValueError):
                holder = ", ".join(f"{k} {v}" for k, v in json.loads(holder).items())
            raise Refusal(
                f"another loop is running on {project_dir} ({holder}): one loop per project at a "
                "time — wait for it, or stop it (its work is kept; --resume goes on from it)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%S")}))
        handle.flush()
        yield
    finally:
        handle.close()  # drops the lock
