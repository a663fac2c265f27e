"""The same workloads through pytest-capevolve and its peers, as ratios measured in one run.

Run: python benchmarks/peers.py [--tasks N] [--trials K]
(optional peers, each skipped with a line when it is not installed:
``pip install inspect-ai pytest-probability``)

W1  no-op per rollout: N tasks × K trials of an agent that returns at once, as one process per
    tool (whole process, less the same tool's start-up on one rollout), per rollout — ours
    (``pytest --capevolve-run``), plain parametrized pytest (one item per rollout, no record),
    pytest-probability (one case run K times) and inspect_ai (``eval`` on ``mockllm``, a solver
    that does nothing, K epochs).
W2  IO-bound in flight: 512 rollouts of a 100 ms sleeping agent, 64 at once — ours
    (``--capevolve-concurrency 64``) and inspect_ai (``max_samples=64``) against the ideal
    512 × 0.1 / 64 s: each tool's whole wall, and what the sleeps add to the same rollouts
    without them (below the ideal: the sleeps overlapped the tool's own per-rollout work).
W3  resume of a run whose rollouts are all persisted: ours only. No peer persists per-rollout
    results that a re-run skips (inspect_ai's ``eval_retry`` re-runs a failed log's missing
    samples; it is not the same workload), so this line says so instead of inventing a ratio.

Each ratio is ours / theirs: below 1 we are faster.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from overhead import make_project  # noqa: E402

PLAIN = """
import pytest

@pytest.mark.parametrize("trial", range({trials}))
@pytest.mark.parametrize("task", range({tasks}))
def test_rollout(task, trial):
    assert task == task  # the no-op agent's answer, scored
"""

PROBABILITY = """
import pytest

@pytest.mark.parametrize("task", range({tasks}))
def bench_rollout(task):  # run --prob-runs times per case: one item per (case, run)
    assert task == task
"""

INSPECT = """
import asyncio, sys
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, accuracy, scorer
from inspect_ai.solver import solver

tasks, trials, sleep, width, logs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

@solver
def agent():
    async def solve(state, generate):
        if sleep:
            await asyncio.sleep(sleep)
        return state
    return solve

@scorer(metrics=[accuracy()])
def exact():
    async def score(state, target):
        return Score(value=1.0)
    return score

dataset = [Sample(input=str(i), target=str(i)) for i in range(tasks)]
eval(Task(dataset=dataset, solver=agent(), scorer=exact(), epochs=trials), model="mockllm/model",
     log_dir=logs, display="none", max_samples=width)
"""


def wall(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} failed:\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    return elapsed


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def ours(tmp: Path, name: str, tasks: int, trials: int, sleep: float, *extra: str) -> float:
    os.environ.update(BENCH_TASKS=str(tasks), BENCH_SLEEP=str(sleep))
    project = make_project(tmp / name, trials)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--capevolve-run",
        str(project),
    ]
    return wall([*command, *extra], project)


def plain(
    tmp: Path, name: str, source: str, tasks: int, trials: int, *extra: str, file: str = "test_rollouts.py"
) -> float:
    folder = tmp / name
    folder.mkdir()
    (folder / file).write_text(source.format(tasks=tasks, trials=trials))
    return wall([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, str(folder)], folder)


def probability(tmp: Path, name: str, tasks: int, trials: int) -> float:
    return plain(tmp, name, PROBABILITY, tasks, trials, "--prob-runs", str(trials), file="bench_rollouts.py")


def inspect(tmp: Path, name: str, tasks: int, trials: int, sleep: float, width: int) -> float:
    folder = tmp / name
    folder.mkdir()
    script = folder / "run_eval.py"
    script.write_text(INSPECT)
    args = [str(tasks), str(trials), str(sleep), str(width), str(folder / "logs")]
    return wall([sys.executable, str(script), *args], folder)


def per_rollout(full: float, one: float, rollouts: int) -> float:
    return max(full - one, 1e-9) / max(rollouts - 1, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--workloads", default="w1,w2,w3", help="which to run, e.g. w2")
    args = parser.parse_args()
    chosen = set(args.workloads.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-peers-"))
    if "w1" in chosen:
        w1(tmp, args.tasks, args.trials)
    if "w2" in chosen:
        w2(tmp)
    if "w3" in chosen:
        print(
            "W3 resume with every rollout persisted: pytest-capevolve only (python benchmarks/scale.py prints it);"
        )
        print("  no peer skips persisted per-rollout results on a re-run, so there is no ratio to print")


def w1(tmp: Path, tasks: int, trials: int) -> None:
    rollouts = tasks * trials
    print(f"W1 no-op per rollout ({tasks} tasks × {trials} trials; whole process less one rollout's)")
    mine = per_rollout(ours(tmp, "w1", tasks, trials, 0.0), ours(tmp, "w1-one", 1, 1, 0.0), rollouts)
    print(f"  pytest-capevolve:    {mine * 1e6:8.0f} µs/rollout")
    peers = {
        "plain pytest": lambda: per_rollout(
            plain(tmp, "plain", PLAIN, tasks, trials), plain(tmp, "plain-one", PLAIN, 1, 1), rollouts
        ),
    }
    if have("pytest_probability"):
        peers["pytest-probability"] = lambda: per_rollout(
            probability(tmp, "prob", tasks, trials), probability(tmp, "prob-one", 1, 1), rollouts
        )
    else:
        print("  pytest-probability:  skipped (not installed: pip install pytest-probability)")
    if have("inspect_ai"):
        peers["inspect_ai"] = lambda: per_rollout(
            inspect(tmp, "inspect", tasks, trials, 0.0, 64),
            inspect(tmp, "inspect-one", 1, 1, 0.0, 64),
            rollouts,
        )
    else:
        print("  inspect_ai:          skipped (not installed: pip install inspect-ai)")
    for name, measure in peers.items():
        theirs = measure()
        print(f"  {name + ':':<21}{theirs * 1e6:8.0f} µs/rollout  (ours {mine / theirs:.2f}x theirs)")


def w2(tmp: Path) -> None:
    """Each tool's whole wall with the sleeps, and what the sleeps add to the same rollouts
    without them: below the ideal means the sleeps overlapped the tool's own per-rollout work."""
    count, sleep, width = 512, 0.1, 64
    ideal = count * sleep / width
    print(
        f"W2 IO-bound in flight ({count} rollouts × {sleep * 1000:.0f} ms, {width} at once; ideal {ideal:.2f}s)"
    )
    flight = ["--capevolve-concurrency", str(width)]
    mine = ours(tmp, "w2", count, 1, sleep, *flight)
    mine_added = mine - ours(tmp, "w2-nosleep", count, 1, 0.0, *flight)
    print(
        f"  pytest-capevolve:    {mine:8.2f} s whole; the sleeps add {mine_added:.2f}s ({mine_added / ideal:.2f}x ideal)"
    )
    if have("inspect_ai"):
        theirs = inspect(tmp, "w2-inspect", count, 1, sleep, width)
        theirs_added = theirs - inspect(tmp, "w2-inspect-nosleep", count, 1, 0.0, width)
        print(
            f"  inspect_ai:          {theirs:8.2f} s whole; the sleeps add {theirs_added:.2f}s "
            f"({theirs_added / ideal:.2f}x ideal); ours {mine / theirs:.2f}x theirs whole"
        )
    else:
        print("  inspect_ai:          skipped (not installed: pip install inspect-ai)")


if __name__ == "__main__":
    main()
