"""Concurrent sessions on one project: nothing paid twice, one run, one promotion per accept.

Each session is a real ``pytest`` process. The adapter below makes them meet before planning
(each process's first ``tasks()`` call waits until N processes arrived — files, not sleeps,
decide when they go on) and logs a line per ``run_target`` call, so the test counts what was
paid, not what the run dir says was paid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SHARED = '''

import os as _os
import time as _time
from pathlib import Path as _Path


class SharedAdapter(ToyCalcAdapter):
    """Logs every paid rollout; with BARRIER_N set, a session's controller waits in its first
    tasks() call until BARRIER_N sessions arrived, so they all plan at the same moment."""

    _arrived = False

    def tasks(self, split):
        here = _Path(__file__).parent
        n = int(_os.environ.get("BARRIER_N", "0"))
        if n and not SharedAdapter._arrived and "PYTEST_XDIST_WORKER" not in _os.environ:
            SharedAdapter._arrived = True
            (here / "arrived").mkdir(exist_ok=True)
            (here / "arrived" / str(_os.getpid())).touch()
            while len(list((here / "arrived").iterdir())) < n:
                _time.sleep(0.005)  # polls a condition; the files decide when to go on
        return super().tasks(split)

    def run_target(self, task, ctx, *, seed):
        with open(_Path(__file__).parent / "observed" / "calls.log", "a") as handle:
            handle.write(f"{task.id} {ctx} {seed}\\n")
        return super().run_target(task, ctx, seed=seed)
'''


def session_command(project: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--capevolve-run",
        str(project),
        *extra,
    ]


def run_together(project: Path, n: int, *extra: str) -> list[subprocess.CompletedProcess[str]]:
    """Start ``n`` sessions at once (they meet in tasks()) and wait for all of them."""
    env = {**os.environ, "BARRIER_N": str(n)}
    env.pop("PYTEST_XDIST_WORKER", None)
    shutil_rm(project / "arrived")
    procs = [
        subprocess.Popen(
            session_command(project, *extra),
            cwd=project.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def shutil_rm(folder: Path) -> None:
    if folder.is_dir():
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


def paid_calls(project: Path) -> list[str]:
    log = project / "observed" / "calls.log"
    return log.read_text().splitlines() if log.is_file() else []


@pytest.mark.attack(
    "held-before",
    attack="2 and 4 concurrent sessions on one run",
    outcome="every rollout is paid once",
)
@pytest.mark.parametrize(
    "n, existing, gate, extra",
    [
        pytest.param(2, False, False, [], id="2-fresh"),
        pytest.param(4, True, False, [], id="4-existing"),
        pytest.param(4, False, True, [], id="4-fresh-gate"),
        pytest.param(2, True, True, ["-n", "2"], id="2-existing-gate-xdist"),
    ],
)
def test_concurrent_sessions_pay_every_rollout_once(
    built, example, projects, n, existing, gate, extra
) -> None:
    def shared() -> tuple[Path, None]:
        project = example("toy_calc")
        projects.add_adapter(project, SHARED, "adapter.py:SharedAdapter")
        projects.writable(project, "observed")  # where run_target notes every paid rollout
        if existing:  # a run with the seed already paid (one build per process: its copy here)
            first = subprocess.run(
                session_command(project), cwd=project.parent, capture_output=True, text=True
            )
            assert first.returncode == 0, first.stdout + first.stderr
        return project, None

    project, _ = built("concurrency-seed-paid", "toy_calc", shared) if existing else shared()
    args = ["--capevolve-candidate", str(project / "candidates" / "careful")]
    if gate:
        args.append("--capevolve-gate")
    results = run_together(project, n, *args, *extra)
    for result in results:
        assert result.returncode == 0, result.stdout + result.stderr

    runs = [p for p in (project / ".capevolve" / "runs").iterdir() if p.is_dir()]
    assert len(runs) == 1, f"{len(runs)} runs: {[p.name for p in runs]}"
    rundir = runs[0]
    calls = paid_calls(project)
    assert len(calls) == len(set(calls)), f"{len(calls) - len(set(calls))} rollouts paid twice"
    files = list((rundir / "rollouts").rglob("*.json"))
    assert len(calls) == len(files)
    state = json.loads((rundir / "state.json").read_text())
    assert state["spent"]["metric_calls"] == len(files)
    events = [json.loads(line) for line in (rundir / "events.jsonl").read_text().splitlines()]
    rollout_events = [
        (e["split"], e["task_id"], e["tag"], e["trial"]) for e in events if e["kind"] == "rollout"
    ]
    assert len(rollout_events) == len(set(rollout_events)) == len(files)
    tags = {"seed", "careful"} | ({"seed-null1", "seed-null2"} if gate else set())
    assert len(files) == 12 * len(tags)
    if gate:
        promotions = [e for e in events if e["kind"] == "best_changed"]
        assert len(promotions) == 1, promotions
        assert state["best_id"] == "careful" and state["iterations"] == 1


CLAIMER = """
import sys
from pathlib import Path
from pytest_capevolve._store.sessions.claims import Claims

claims = Claims(Path(sys.argv[1]))
claims.take([("val", "q01", "seed", 0)])
print("claimed", flush=True)
sys.stdin.read()  # hold the claim until killed
"""


def test_a_claim_whose_session_was_killed_blocks_nothing(tmp_path: Path) -> None:
    from pytest_capevolve._store.sessions.claims import Claims

    with subprocess.Popen(
        [sys.executable, "-c", CLAIMER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == "claimed\n"
            mine = Claims(tmp_path)
            held = mine.others()
            assert list(held) == [("val", "q01", "seed", 0)]
            child.kill()  # kill -9: the kernel drops its flock
            child.wait()
            Claims.wait_for(held.values())  # returns: the holder is gone
            assert mine.others() == {}
            assert list((tmp_path / "claims").iterdir()) == []  # the void claim was swept
        finally:
            child.kill()
