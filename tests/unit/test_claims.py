"""Rollout claims whose session died: void however their lock is held.

A session killed while it held claims can leave their lock held by a process it started that
kept the descriptor. The claim names its owner (pid, host, start time); once that owner is dead
the claim is void: the next planner takes its rollouts over, and a waiter stops waiting on it
and says which sessions died.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_capevolve._store.sessions.claims import Claims, owner_alive, process_start

KEYS = [("val", "t1", "cand", 0), ("val", "t2", "cand", 0)]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _plant(root: Path, **owner) -> Path:
    folder = root / "claims"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "1-dead.json"
    path.write_text(
        json.dumps({"host": socket.gethostname(), "since": 0.0, **owner, "keys": [list(k) for k in KEYS]})
    )
    return path


@pytest.fixture
def held():
    """Hold a claim file's lock from here, as what a dead session left running would."""
    handles = []

    def hold(path: Path) -> None:
        handle = open(path, encoding="utf-8")
        fcntl.flock(handle, fcntl.LOCK_EX)
        handles.append(handle)

    yield hold
    for handle in handles:
        handle.close()


def test_a_held_claim_of_a_dead_owner_is_void_for_the_next_planner(tmp_path: Path, held) -> None:
    path = _plant(tmp_path, pid=_dead_pid())
    held(path)
    assert Claims(tmp_path).others() == {}  # its rollouts are owed again
    assert not path.exists()


def test_a_held_claim_of_a_live_owner_stands(tmp_path: Path, held) -> None:
    path = _plant(tmp_path, pid=os.getpid(), started=process_start(os.getpid()))
    held(path)
    assert set(Claims(tmp_path).others()) == set(KEYS)


def test_a_pid_used_again_is_another_owner() -> None:
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    assert owner_alive({**me, "started": process_start(os.getpid())})
    assert not owner_alive({**me, "started": (process_start(os.getpid()) or 0) + 1})
    assert owner_alive({"pid": _dead_pid(), "host": "another-host"})  # cannot be asked: believed


@pytest.mark.attack(
    "damage",
    attack=(
        "a session killed holding claims, their lock kept by a process it left running (the next "
        'session waited, or skipped them: "0 paid, 300 reused", exit 12)'
    ),
)
def test_a_waiter_stops_waiting_on_a_dead_owners_claim_and_says_so(tmp_path: Path, held) -> None:
    path = _plant(tmp_path, pid=_dead_pid())
    held(path)  # its lock never drops: a blocking wait would never return
    assert Claims.wait_for([path], poll_s=0.01) == [path]
    released = _plant(tmp_path, pid=os.getpid())
    released.unlink()  # a session that ends deletes its claim: nothing died
    assert Claims.wait_for([released]) == []
