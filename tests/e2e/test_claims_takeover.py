"""Issue 24, item 12: a session waiting on another's rollouts when that session dies.

It used to give up with exit 12 and "0 paid, 300 reused": the rollouts the dead session left
unpaid were no one's, and the waiter said only that they were missing. Now it takes the void
claims over and pays them itself, each once (:mod:`pytest_capevolve._session.persistence`).

Deterministic, without sleeps: the claim is planted before the session plans, naming as its
owner a process this test started (alive, so the session waits on it rather than owing its
rollouts), with its lock held from here (as a process the dead session left running would
hold it); a plugin kills and reaps the owner as the session starts, before it waits.
"""

from __future__ import annotations

import fcntl
import json
import socket
import subprocess
import sys

import pytest

from pytest_capevolve._store.rundir import RunDir
from pytest_capevolve._store.sessions.claims import process_start


class _KillsTheOwner:
    def __init__(self, owner: subprocess.Popen) -> None:
        self.owner = owner

    def pytest_sessionstart(self, session) -> None:
        self.owner.kill()
        self.owner.wait()  # reaped: its pid names no process any more


@pytest.mark.attack(
    "damage",
    attack=(
        "a session already waiting on another's rollouts when that session dies (it gave up: \"the "
        "rollouts they left unpaid are no one's now\", exit 12)"
    ),
    outcome=(
        "the waiter takes the void claims over under the run's lock and pays what they left unpaid "
        "itself, each once; exit 0"
    ),
)
def test_a_waiter_pays_what_a_dead_session_left_unpaid_itself_once_each(
    toy_calc_baseline, projects, capevolve, pytester
) -> None:
    project = toy_calc_baseline  # the seed's val rollouts: the candidate is what is owed
    run_dir = projects.run_dir(project)
    val = sorted(RunDir(run_dir).splits()["val"])
    taken = [["val", task, "careful", 0] for task in val[:4]]
    owner = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    claim = run_dir / "claims" / f"{owner.pid}-0dead0.json"
    claim.parent.mkdir(exist_ok=True)
    started = process_start(owner.pid)
    owned = {"pid": owner.pid, "host": socket.gethostname(), "since": 0.0, "started": started}
    claim.write_text(json.dumps({**owned, "keys": taken}))
    with open(claim, encoding="utf-8") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # never let go: only the owner's death voids the claim
        try:
            result = pytester.runpytest(*capevolve.args(project, "careful"), plugins=[_KillsTheOwner(owner)])
        finally:
            owner.kill()
            owner.wait()
            # its pipe too: left to the garbage collector, "unclosed file" failed whichever later
            # test the collector ran in (filterwarnings = error)
            owner.stdin.close()
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    assert "4 rollouts were being paid by 1 concurrent session(s)" in out, out[-3000:]
    assert "took their claims over and paid the 4 rollout(s) they left unpaid (each once)" in out
    assert "missing" not in out.split("rollouts were being paid")[1], out[-3000:]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    paid = [(e["task_id"], e["trial"]) for e in events if e["kind"] == "rollout" and e["tag"] == "careful"]
    assert sorted(paid) == sorted((task, 0) for task in val)  # every one, none twice
    assert not claim.exists()  # the void claim was taken over
    assert not list((run_dir / "claims").glob("*.json"))  # and the taker let go of its own
