"""Rollout claims: which session is paying which rollout right now, so none is paid twice.

Controller only, in the run dir's ``claims/`` folder. While a session plans (under the run's
lock) it reads every other session's claim file, owes only the rollouts nobody persisted or
claimed, and writes its own claim ``claims/<pid>-<token>.json`` listing them. It holds an
exclusive ``flock`` on that file for as long as it pays; after its run loop it deletes the file
and lets go. A later session that needs a claimed rollout does not pay it: it waits for the
claim's lock (a shared ``flock`` returns when the holder lets go) and then reads what landed.

Crash-safe by construction: the kernel drops a ``flock`` when its holder dies (``kill -9``
included), so a claim nobody holds is void — the next planner deletes it and owes its rollouts
again — and a waiter is never blocked by a dead session. Waits only go from later sessions to
earlier ones (a session claims only what nobody claimed before it), so they cannot form a cycle.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO

Key = tuple[str, str, str, int]  # (split, task_id, tag, trial)


class Claims:
    """One session's view of a run's claims; ``take`` and ``others`` need the run's lock."""

    def __init__(self, root: Path) -> None:
        self.folder = root / "claims"
        self.path: Path | None = None
        self._handle: IO[str] | None = None

    def others(self) -> dict[Key, Path]:
        """Rollouts claimed by other live sessions, with the claim file that holds each.
        A claim whose holder died is deleted here (its rollouts are owed again)."""
        claimed: dict[Key, Path] = {}
        for path in sorted(self.folder.glob("*.json")):
            if path == self.path:
                continue
            try:
                handle = open(path, encoding="utf-8")
            except FileNotFoundError:
                continue
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # held: a live session is paying these
                    try:
                        keys = json.loads(handle.read())["keys"]
                    except (ValueError, KeyError, TypeError):
                        continue
                    for split, task, tag, trial in keys:
                        claimed[(str(split), str(task), str(tag), int(trial))] = path
                    continue
                path.unlink(missing_ok=True)  # nobody holds it: its session died
        return claimed

    def take(self, keys: Iterable[Key]) -> None:
        """Claim ``keys`` for this session (one file, locked until :meth:`release`)."""
        keys = sorted(keys)
        if not keys:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{os.getpid()}-{secrets.token_hex(4)}.json"
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666)
        handle = os.fdopen(fd, "r+", encoding="utf-8")
        fcntl.flock(handle, fcntl.LOCK_EX)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": round(time.time(), 3)}
        handle.write(json.dumps({**info, "keys": [list(k) for k in keys]}))
        handle.flush()
        self.path, self._handle = path, handle

    def release(self) -> None:
        """Let go of this session's claim: everything it paid is persisted, or it is ending."""
        if self._handle is None:
            return
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None

    @staticmethod
    def wait_for(paths: Iterable[Path]) -> None:
        """Block until the sessions holding these claims let go of them (or died)."""
        for path in paths:
            try:
                handle = open(path, encoding="utf-8")
            except FileNotFoundError:
                continue  # already released
            with handle:
                fcntl.flock(handle, fcntl.LOCK_SH)
                fcntl.flock(handle, fcntl.LOCK_UN)


def live_sessions(runs_dir: Path, mine: Path | None = None) -> list[dict[str, object]]:
    """The sessions paying rollouts right now in any run of the project (each holds its claim's
    ``flock``; a dead one's lock is gone, so a stale file is never counted): run id, pid, host,
    since, rollouts claimed. ``mine``: this session's own claim, left out. Deletes nothing."""
    found: list[dict[str, object]] = []
    for path in sorted(runs_dir.glob("*/claims/*.json")):
        if mine is not None and path == mine:
            continue
        try:
            handle = open(path, encoding="utf-8")
        except FileNotFoundError:
            continue
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # held exclusively: a live session is paying
                try:
                    info = json.loads(handle.read())
                except ValueError:
                    info = {}
                info = info if isinstance(info, dict) else {}
                found.append(
                    {
                        "run_id": path.parent.parent.name,
                        "pid": info.get("pid"),
                        "host": info.get("host"),
                        "since": info.get("since"),
                        "rollouts": len(info.get("keys") or []),
                    }
                )
                continue
            fcntl.flock(handle, fcntl.LOCK_UN)
    return found
