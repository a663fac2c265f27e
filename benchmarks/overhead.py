"""Per-rollout overhead of the plugin path, and xdist fan-out against the ideal.

Run: python benchmarks/overhead.py   (figures are ratios against baselines measured in the
same run, because these machines are shared and noisy)

1. A no-op adapter: bare Python loop calling run_target + score and writing the same JSON
   record atomically, versus `pytest --capevolve-run` on the same adapter (in-process).
2. 200 rollouts of a 50 ms sleeping agent at `-n 8`, versus the ideal 200 × 0.05 / 8 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ADAPTER = """
import os, time
from pytest_capevolve import Rollout
from pytest_capevolve import Score
from pytest_capevolve import Task

class Adapter:
    def tasks(self, split):
        return [Task(id=f"t{i:04d}", input=i, target=i) for i in range(int(os.environ["BENCH_TASKS"]))]
    def run_target(self, task, ctx, *, seed):
        time.sleep(float(os.environ["BENCH_SLEEP"]))
        return Rollout(task_id=task.id, output=task.input)
    def score(self, task, rollout):
        return Score(reward=1.0 if rollout.output == task.target else 0.0)
"""
SPEC = """adapter: adapter.py:Adapter
capability_path: capability
split_train: 0.0
split_val: 1.0
split_test: 0.0
num_trials: {trials}
"""


def make_project(root: Path, trials: int) -> Path:
    root.mkdir(parents=True)
    (root / "adapter.py").write_text(ADAPTER)
    (root / "capevolve.yaml").write_text(SPEC.format(trials=trials))
    (root / "capability").mkdir()
    (root / "capability" / "prompt.md").write_text("hello\n")
    return root


def bare_loop(project: Path, tasks: int, trials: int) -> float:
    """The same work without pytest: call the adapter, write the same record atomically."""
    sys.path.insert(0, str(project))
    import adapter  # type: ignore[import-not-found]

    from pytest_capevolve.store.files import atomic_write_json

    a = adapter.Adapter()
    out = project / "bare"
    start = time.perf_counter()
    for task in a.tasks("all"):
        for k in range(trials):
            rollout = a.run_target(task, project / "capability", seed=k)
            score = a.score(task, rollout)
            record = {
                "task_id": task.id,
                "trial": k,
                "reward": score.reward,
                "output": rollout.output,
            }
            atomic_write_json(out / f"{task.id}__seed__t{k}.json", record)
    return time.perf_counter() - start


def plugin_run(project: Path, *extra: str) -> float:
    """Wall time of one `pytest --capevolve-run` subprocess on ``project``."""
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--capevolve-run",
            str(project),
            "-q",
            "-p",
            "no:cacheprovider",
            *extra,
        ],
        check=True,
        cwd=project,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def startup(project: Path) -> float:
    """The fixed cost of a session: the same command collecting only."""
    return plugin_run(project, "--collect-only")


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-bench-"))
    tasks, trials = 500, 4
    os.environ.update(BENCH_TASKS=str(tasks), BENCH_SLEEP="0")
    n = tasks * trials
    project = make_project(tmp / "noop", trials)
    fixed = startup(make_project(tmp / "noop_startup", trials))
    # paired: the bare loop runs right before and right after the plugin, and the baseline is
    # their mean, so a change of load on this shared machine shifts both sides alike
    before = bare_loop(project, tasks, trials)
    total = plugin_run(project)
    bare = (before + bare_loop(project, tasks, trials)) / 2
    per_bare = bare / n
    per_plugin = max(total - fixed, 0.0) / n
    print(f"no-op adapter, {n} rollouts")
    print(f"  bare loop:          {per_bare * 1e6:8.1f} µs/rollout")
    print(
        f"  plugin (in-process):{per_plugin * 1e6:8.1f} µs/rollout  (session start-up {fixed:.2f}s excluded)"
    )
    print(f"  overhead ratio plugin/bare: {per_plugin / per_bare:.1f}x")

    os.environ.update(BENCH_TASKS="200", BENCH_SLEEP="0.05")
    sleepy = make_project(tmp / "sleepy", 1)
    ideal = 200 * 0.05 / 8
    wall = plugin_run(sleepy, "-n", "8")
    print("200 rollouts of a 50 ms agent at -n 8")
    print(f"  wall {wall:.2f}s vs ideal {ideal:.2f}s: ratio {wall / ideal:.2f}x")
    print(f"  (a bare serial loop would take {200 * 0.05:.2f}s)")
    json.dump({"per_rollout_ratio": per_plugin / per_bare, "xdist_ratio": wall / ideal}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
