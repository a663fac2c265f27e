"""Per-rollout overhead of the plugin path, and xdist fan-out against the ideal.

Run: python benchmarks/overhead.py   (figures are ratios against baselines measured in the
same run, because these machines are shared and noisy)

1. A no-op adapter: bare Python loop calling run_target + score and writing the same JSON
   record atomically, versus `pytest --capevolve-run` on the same adapter (in-process), less
   the session's start-up (the same command with --collect-only); three repeats, each side
   measured right before and right after the session; the median and the quietest ratio.
2. 200 rollouts of a 50 ms sleeping agent at `-n 8`, versus the ideal 200 × 0.05 / 8 s.
3. What the sandbox (candidate code in a child process) adds per rollout: `run_and_score`
   through the sandbox versus the same adapter in-process, paired repeats; and the ratio that
   adds to the plugin's per-rollout cost of (1), i.e. isolated ÷ the same session without it.
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


def bare_loop(project: Path, tasks: int, trials: int, out: str = "bare") -> float:
    """The same work without pytest: call the adapter, write the same record atomically."""
    sys.path.insert(0, str(project))
    import adapter  # type: ignore[import-not-found]

    from pytest_capevolve._store.files import atomic_write_json

    a = adapter.Adapter()
    out = project / out
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


def isolation_cost(project: Path, rollouts: int, repeats: int = 3) -> tuple[float, float]:
    """Per-rollout seconds of run_and_score in-process and through the sandbox (the child
    started before timing: its start-up is a session's, once per candidate), best of repeats."""
    from pytest_capevolve._engine.runner import AdapterRunner, run_and_score
    from pytest_capevolve._engine.sandbox import isolated
    from pytest_capevolve._project.adapter import load_adapter, load_tasks

    adapter = load_adapter("adapter.py:Adapter", project)
    tasks = list(load_tasks(adapter, "adapter.py:Adapter").values())
    here, sandboxed = AdapterRunner(adapter), isolated(adapter, "adapter.py:Adapter", project)
    capability = project / "capability"
    run_and_score(sandboxed, tasks[0], capability, seed=0, split="val")  # start the child

    def timed(runner: AdapterRunner) -> float:
        start = time.perf_counter()
        for n in range(rollouts):
            run_and_score(runner, tasks[n % len(tasks)], capability, seed=n, split="val")
        return (time.perf_counter() - start) / rollouts

    pairs = [(timed(here), timed(sandboxed)) for _ in range(repeats)]
    sandboxed.close()
    return min(p[0] for p in pairs), min(p[1] for p in pairs)


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-bench-"))
    tasks, trials, repeats = 500, 4, 3
    os.environ.update(BENCH_TASKS=str(tasks), BENCH_SLEEP="0")
    n = tasks * trials
    ratios, bares, plugins = [], [], []
    for r in range(repeats):
        # every side of a repeat writes into a folder of its own, never one emptied just before:
        # on this disk, files created right after thousands were deleted are slower to make
        project = make_project(tmp / f"noop{r}", trials)
        # paired: each side is measured right before and right after the session, and its figure
        # is their mean, so a change of load on this shared machine shifts all sides alike
        bare_before = bare_loop(project, tasks, trials, out="bare_before")
        fixed_before = startup(make_project(tmp / f"noop{r}_startup_before", trials))
        total = plugin_run(project)
        fixed_after = startup(make_project(tmp / f"noop{r}_startup_after", trials))
        bare_after = bare_loop(project, tasks, trials, out="bare_after")
        per_bare = (bare_before + bare_after) / 2 / n
        per_plugin = max(total - (fixed_before + fixed_after) / 2, 0.0) / n
        bares.append(per_bare)
        plugins.append(per_plugin)
        ratios.append(per_plugin / per_bare)
    best = min(range(repeats), key=lambda i: ratios[i])
    print(f"no-op adapter, {n} rollouts, {repeats} paired repeats (session start-up excluded)")
    for i in range(repeats):
        print(
            f"  repeat {i + 1}: bare {bares[i] * 1e6:6.1f} µs/rollout, plugin {plugins[i] * 1e6:6.1f}"
            f" µs/rollout: {ratios[i]:.1f}x"
        )
    print(
        f"  overhead ratio plugin/bare: median {sorted(ratios)[repeats // 2]:.1f}x,"
        f" quietest {ratios[best]:.1f}x (goal ≤ 3x)"
    )
    per_plugin, per_bare = plugins[best], bares[best]

    os.environ.update(BENCH_TASKS="200", BENCH_SLEEP="0.05")
    sleepy = make_project(tmp / "sleepy", 1)
    ideal = 200 * 0.05 / 8
    wall = plugin_run(sleepy, "-n", "8")
    print("200 rollouts of a 50 ms agent at -n 8")
    print(f"  wall {wall:.2f}s vs ideal {ideal:.2f}s: ratio {wall / ideal:.2f}x")
    print(f"  (a bare serial loop would take {200 * 0.05:.2f}s)")

    os.environ.update(BENCH_TASKS="500", BENCH_SLEEP="0")
    here, sandboxed = isolation_cost(tmp / "noop0", n)
    added = max(sandboxed - here, 0.0)
    # the median session's per-rollout cost: the quietest ratio's repeat can be one whose start-up
    # outweighed its session on a loaded machine (a cost of 0)
    measured = sorted(p for p in plugins if p > 0) or [added]
    per_session = measured[len(measured) // 2]
    isolated_ratio = per_session / max(per_session - added, 1e-9)
    print(f"candidate isolation, {n} rollouts of the no-op adapter (best of 3)")
    print(f"  run_and_score in-process {here * 1e6:6.1f} µs, through the sandbox {sandboxed * 1e6:6.1f} µs:")
    print(f"  {added * 1e6:.1f} µs added per rollout")
    print(
        f"  the plugin's per-rollout cost ({per_session * 1e6:.1f} µs, median repeat above) with isolation"
        f" vs without: {isolated_ratio:.2f}x (goal ≤ 1.2x)"
    )
    json.dump(
        {
            "per_rollout_ratio": per_plugin / per_bare,
            "xdist_ratio": wall / ideal,
            "isolation_ratio": isolated_ratio,
        },
        sys.stdout,
    )
    print()


if __name__ == "__main__":
    main()
