"""Rollout claims: which session is paying which rollout right now, so none is paid twice.

A planning session writes ``claims/<pid>-<token>.json`` listing what it owes and holds a ``flock``
on it while it pays; later sessions wait for that lock (never a cycle, never on a dead session).
A lock can outlive its session (a child kept the descriptor), so a claim counts only while its
owner (pid, host, start time) lives."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from ..log.event_kinds import CLAIMED
from ..log.paid_by import Key, claimed_keys

WAIT_POLL_S = 0.5  # how often a waiter looks again at a claim whose owner lives


class Claims:
    """One session's view of a run's claims; ``take`` and ``others`` need the run's lock."""

    def __init__(self, root: Path, log: Callable[..., None] | None = None) -> None:
        self.folder = root / "claims"
        self.path: Path | None = None
        self._handle: IO[str] | None = None
        # this session's claim in the log: every rollout event it writes names it (.paid_by)
        self.claim_id = f"{os.getpid()}-{secrets.token_hex(6)}"
        self._log = log

    def others(self) -> dict[Key, Path]:
        """Rollouts claimed by other live sessions, with each claim file; a dead holder's is deleted."""
        claimed: dict[Key, Path] = {}
        for path in sorted(self.folder.glob("*.json")):
            if path == self.path:
                continue
            claim = held_claim(path, remove_unheld=True)  # nobody holds it: its session died
            if claim is None or not isinstance(keys := claim.get("keys"), list):
                continue
            if not owner_alive(claim):  # held by what its dead session left running
                path.unlink(missing_ok=True)
                continue
            for split, task, tag, trial in keys:
                claimed[(str(split), str(task), str(tag), int(trial))] = path
        return claimed

    def take(self, keys: Iterable[Key]) -> None:
        keys = sorted(keys)
        if not keys:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{os.getpid()}-{secrets.token_hex(4)}.json"
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666)
        handle = os.fdopen(fd, "r+", encoding="utf-8")
        fcntl.flock(handle, fcntl.LOCK_EX)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": round(time.time(), 3)}
        info["started"] = process_start(os.getpid())
        handle.write(json.dumps({**info, "keys": [list(k) for k in keys]}))
        handle.flush()
        self.path, self._handle = path, handle
        if self._log is not None:  # what this session may pay, in the record (:mod:`..log.paid_by`)
            self._log(CLAIMED, claim=self.claim_id, keys=claimed_keys(keys))

    def release(self) -> None:
        if self._handle is None:
            return
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None

    @staticmethod
    def wait_for(paths: Iterable[Path], poll_s: float = WAIT_POLL_S) -> list[Path]:
        """Block until the sessions holding these claims let go or died; returns those that died."""
        died: list[Path] = []
        for path in paths:
            # held by a live owner: look again (its lock or its life); a dead owner lands nothing more
            while (claim := held_claim(path)) is not None and owner_alive(claim):
                time.sleep(poll_s)
            if path.exists():
                died.append(path)
        return died


def process_start(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None: with the pid, one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[19])  # the 22nd field of stat, counting the two before ")"
    except (OSError, IndexError, ValueError):
        return None


def owner_alive(claim: dict[str, object]) -> bool:
    """Whether the session that made ``claim`` still runs (another host's, or one without a pid: yes)."""
    pid, host = claim.get("pid"), claim.get("host")
    if type(pid) is not int or host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    started = claim.get("started")
    now = process_start(pid)
    return not (isinstance(started, int) and now is not None and now != started)


def live_sessions(runs_dir: Path, mine: Path | None = None) -> list[dict[str, object]]:
    """The sessions paying rollouts now in any run of the project, but ``mine``. Deletes nothing."""
    found: list[dict[str, object]] = []
    for path in sorted(runs_dir.glob("*/claims/*.json")):
        if mine is not None and path == mine:
            continue
        info = held_claim(path)
        if info is None or not owner_alive(info):
            continue  # nobody holds it, or its owner died and something it left holds the lock
        owner = {key: info.get(key) for key in ("pid", "host", "since")}
        keys: Any = info.get("keys") or []
        found.append({"run_id": path.parent.parent.name, **owner, "rollouts": len(keys)})
    return found


def held_claim(path: Path, *, remove_unheld: bool = False) -> dict[str, object] | None:
    """What the claim file says while a session holds its lock (``{}`` if unreadable); None when gone
    or unheld (then deleted, with ``remove_unheld``: a planner under the run's lock)."""
    try:
        handle = open(path, encoding="utf-8")
    except FileNotFoundError:
        return None
    with handle:
        try:
            fcntl.flock(handle, (fcntl.LOCK_EX if remove_unheld else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:  # held: a session is paying these, if its owner lives
            try:
                claim = json.loads(handle.read())
            except ValueError:  # garbled, or not UTF-8
                return {}
            return claim if isinstance(claim, dict) else {}
        if remove_unheld:
            path.unlink(missing_ok=True)
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None
