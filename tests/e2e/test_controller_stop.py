"""Issue 24, attack 10: xdist workers kept paying after their controller stopped — rollouts no
one would record, so the next session paid them again (2,267 of 22,267 after a ``kill -9`` at
no-op speed; 56 of 203 after a Ctrl-C to the controller alone). Now a worker never runs more
than its window ahead of what the controller recorded, and starts nothing once the controller
has stopped: a stopped controller re-pays at most the window of each worker."""

from __future__ import annotations

import json
import signal
import textwrap
import time
from pathlib import Path

import pytest

from pytest_capevolve._session.persistence import RECORD_WINDOW_MIN

TASKS = 1500
SIGNAL_AT = 150

CONFTEST = """
import os
from pathlib import Path

def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller: where the agent finds it
        (Path(__file__).parent / "proj" / "controller.pid").write_text(str(os.getpid()))
"""

ADAPTER = f"""
import os
from pathlib import Path
from pytest_capevolve import Rollout, Score, Task

HERE = Path(__file__).parent

class Adapter:
    def tasks(self, split):
        return [Task(id=f"t{{i:04d}}", input=i, target=i) for i in range({TASKS})]

    def run_target(self, task, ctx, *, seed):
        # in the sandbox child: the rollout is paid here, noted in a folder it may write
        with open(HERE / "observed" / "calls.log", "a") as log:
            log.write(f"{{os.getpid()}} {{task.id}}\\n")
        return Rollout(task_id=task.id, output=task.input)

    def score(self, task, rollout):
        # in the worker, outside the boundary: a confined child cannot signal the controller
        signal_to_send = os.environ.get("STOP_CONTROLLER_WITH")
        # at the SIGNAL_AT-th call or past it (two workers append at once: a count read after
        # both wrote skips it), once: the first to create the marker sends the signal
        if signal_to_send and (HERE / "observed" / "calls.log").read_text().count("\\n") >= {SIGNAL_AT}:
            try:
                os.close(os.open(HERE / "signalled", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                os.kill(int((HERE / "controller.pid").read_text()), int(signal_to_send))
        return Score(reward=1.0)
"""

SPEC = """adapter: adapter.py:Adapter
capability_path: capability
split_train: 0.0
split_val: 1.0
split_test: 0.0
num_trials: 1
sandbox_writable: [observed]
"""


def _alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()  # a zombie is dead
    except OSError:
        return False


@pytest.mark.attack(
    "damage",
    attack=(
        "`kill -9` or Ctrl-C of the controller alone, under `-n 2` (workers used to go on paying for "
        "rollouts no one recorded)"
    ),
    outcome="at most each worker's window (`max(16, 4 × concurrency)` rollouts) is paid again",
)
@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_a_stopped_controller_re_pays_at_most_each_workers_window(
    pytester, capevolve, monkeypatch, stop
) -> None:
    project = pytester.path / "proj"
    project.mkdir()
    (project / "adapter.py").write_text(textwrap.dedent(ADAPTER))
    (project / "capevolve.yaml").write_text(SPEC)
    (project / "capability").mkdir()
    (project / "observed").mkdir()
    (project / "capability" / "prompt.md").write_text("hello\n")
    (pytester.path / "conftest.py").write_text(CONFTEST)
    monkeypatch.setenv("STOP_CONTROLLER_WITH", str(int(stop)))
    stopped = capevolve(project, extra=["-n", "2"], subprocess=True)
    assert stopped.ret != 0, stopped.stdout.str()[-1500:]
    workers = {int(line.split()[0]) for line in (project / "observed" / "calls.log").read_text().splitlines()}
    deadline = time.monotonic() + 120  # a bound on a condition: the orphaned workers' exit
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, workers)), "the workers outlived their controller by two minutes"
    monkeypatch.delenv("STOP_CONTROLLER_WITH")
    resumed = capevolve(project)  # pays what the stopped session did not record
    assert resumed.ret == 0, resumed.stdout.str()[-1500:]
    calls = (project / "observed" / "calls.log").read_text().splitlines()
    run = next((project / ".capevolve" / "runs").iterdir())
    recorded = [
        e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["kind"] == "rollout"
    ]
    assert len({e["task_id"] for e in recorded}) == len(recorded) == TASKS
    paid_twice = len(calls) - TASKS
    assert paid_twice <= len(workers) * RECORD_WINDOW_MIN, f"{paid_twice} rollouts paid twice"
