"""Concurrent sessions on one project: rollouts paid against rollouts needed (goal 1.00).

Run: python benchmarks/concurrency.py

For N = 1, 2, 4: a fresh copy of examples/toy_calc, N `pytest --capevolve-run` sessions of the
same candidates started at once (each waits in its first tasks() call until all N arrived, so
they plan at the same moment), every run_target call logged by the adapter. Paid = lines in
the log; needed = distinct rollouts (12 val tasks × 1 trial × {seed, careful, 2 nulls}).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = """

import os as _os
import time as _time
from pathlib import Path as _Path


class SharedAdapter(ToyCalcAdapter):
    _arrived = False

    def tasks(self, split):
        here = _Path(__file__).parent
        n = int(_os.environ.get("BARRIER_N", "0"))
        if n and not SharedAdapter._arrived and "PYTEST_XDIST_WORKER" not in _os.environ:
            SharedAdapter._arrived = True
            (here / "arrived").mkdir(exist_ok=True)
            (here / "arrived" / str(_os.getpid())).touch()
            while len(list((here / "arrived").iterdir())) < n:
                _time.sleep(0.005)
        return super().tasks(split)

    def run_target(self, task, ctx, *, seed):
        with open(_Path(__file__).parent / "calls.log", "a") as handle:
            handle.write(f"{task.id} {ctx} {seed}\\n")
        return super().run_target(task, ctx, seed=seed)
"""


def one(n: int, base: Path) -> tuple[int, int, int, float]:
    project = base / f"toy_calc_{n}"
    shutil.copytree(REPO / "examples" / "toy_calc", project, ignore=shutil.ignore_patterns(".capevolve"))
    with (project / "adapter.py").open("a") as handle:
        handle.write(SHARED)
    spec = project / "capevolve.yaml"
    spec.write_text(spec.read_text().replace("adapter.py:ToyCalcAdapter", "adapter.py:SharedAdapter"))
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--capevolve-run",
        str(project),
    ]
    command += ["--capevolve-candidate", str(project / "candidates" / "careful"), "--capevolve-gate"]
    env = {**os.environ, "BARRIER_N": str(n)}
    started = time.perf_counter()
    procs = [
        subprocess.Popen(command, cwd=base, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(n)
    ]
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - started
    calls = (project / "calls.log").read_text().splitlines()
    runs = [p for p in (project / ".capevolve" / "runs").iterdir() if p.is_dir()]
    assert all(c == 0 for c in codes), codes
    return len(calls), len(set(calls)), len(runs), wall


def main() -> None:
    print("sessions  paid  needed  paid/needed  runs  wall s")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1, 2, 4):
            paid, needed, runs, wall = one(n, Path(tmp))
            print(f"{n:>8}  {paid:>4}  {needed:>6}  {paid / needed:>11.2f}  {runs:>4}  {wall:>6.1f}")


if __name__ == "__main__":
    main()
