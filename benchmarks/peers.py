"""The same workloads through pytest-capevolve and its peers, as ratios measured in one run.

Run: .venv/bin/python benchmarks/peers.py [--tasks N] [--trials K] [--workloads w1,w2,w3]
       [--repeats R] [--peers plain] [--old DIR] [--tmp DIR]
(N × K: W1's size, default 500 × 4; optional peers, each skipped with a line when it is not
installed: ``.venv/bin/pip install pytest-probability``; inspect_ai comes with ``.[test]``;
``--peers`` keeps only the peers named; ``--old DIR`` adds W1's line for the package in
``DIR/pytest_capevolve``, e.g. ``git archive main pytest_capevolve | tar -x -C DIR``, put first
on ``PYTHONPATH``: the code before a change, measured in the same rounds as after it)

Each figure is the better of R runs (default 2) taken in turns with what it is compared to (W1:
one round runs every tool once), after one run thrown away (the first process of a batch reads
cold files); W1 also prints the spread over the rounds, and each ratio paired round by round (its
median and range: steadier under load than the best against the best). A difference smaller than the noise is
said to be so, not printed as a number. Every process writes and reads bytecode caches (a shell's
``PYTHONDONTWRITEBYTECODE`` is dropped for them): a figure is the tool's work, not compiling it.

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
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).parent))
from overhead import make_project, session_command  # noqa: E402

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


class Cost(NamedTuple):
    """One process tree's wall seconds and CPU seconds (user + system, the tree's every waited-for
    process: the sandbox children and xdist workers included, which the wall figure hides when
    they run on the other core)."""

    wall: float
    cpu: float


def _tree_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


# every tool's processes cache bytecode, as a user's do: compiling is no tool's per-rollout cost
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> Cost:
    start, cpu = time.perf_counter(), _tree_cpu()
    done = subprocess.run(
        command, cwd=cwd, env=ENV if env is None else env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} failed:\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    return Cost(elapsed, _tree_cpu() - cpu)


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def ours(
    tmp: Path, name: str, tasks: int, trials: int, sleep: float, *extra: str, old: str | None = None
) -> Cost:
    os.environ.update(BENCH_TASKS=str(tasks), BENCH_SLEEP=str(sleep))
    ENV.update(BENCH_TASKS=str(tasks), BENCH_SLEEP=str(sleep))
    env = dict(ENV)
    if old is not None:  # the package in ``old`` first on the path: the code before a change
        env["PYTHONPATH"] = os.pathsep.join(p for p in (old, ENV.get("PYTHONPATH")) if p)
    project = make_project(tmp / name, trials)
    command = session_command(project)
    return wall([*command, *extra], project, env)


def plain(
    tmp: Path, name: str, source: str, tasks: int, trials: int, *extra: str, file: str = "test_rollouts.py"
) -> Cost:
    folder = tmp / name
    folder.mkdir()
    (folder / file).write_text(source.format(tasks=tasks, trials=trials))
    return wall([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, str(folder)], folder)


def probability(tmp: Path, name: str, tasks: int, trials: int) -> Cost:
    return plain(tmp, name, PROBABILITY, tasks, trials, "--prob-runs", str(trials), file="bench_rollouts.py")


def inspect(tmp: Path, name: str, tasks: int, trials: int, sleep: float, width: int) -> Cost:
    folder = tmp / name
    folder.mkdir()
    script = folder / "run_eval.py"
    script.write_text(INSPECT)
    args = [str(tasks), str(trials), str(sleep), str(width), str(folder / "logs")]
    return wall([sys.executable, str(script), *args], folder)


REPEATS = 2  # each figure is the better of this many runs, interleaved with what it is compared to


class PerRollout(NamedTuple):
    """Wall and CPU seconds per rollout, the better of the rounds, and the CPU's spread over them."""

    best: Cost
    cpu_spread: tuple[float, float]
    cpu_rounds: tuple[float, ...] = ()  # CPU per rollout in each round, for ratios paired by round


def per_rollout(
    tools: dict[str, Callable[[str, int, int], Cost]], tasks: int, trials: int
) -> dict[str, PerRollout | None]:
    """Per tool: wall and CPU seconds per rollout, (its whole process tree on tasks × trials) less
    (the same on one rollout), each the better of REPEATS rounds; a round runs every tool in turn,
    so a change of load falls on all of them. One run of each is thrown away first (the first
    process of a batch reads cold files). None when the wall difference is within the noise."""
    for run in tools.values():
        run("warm-up", 1, 1)
    ones: dict[str, list[Cost]] = {name: [] for name in tools}
    fulls: dict[str, list[Cost]] = {name: [] for name in tools}
    for i in range(REPEATS):
        for name, run in tools.items():
            ones[name].append(run(f"one-{i}", 1, 1))
            fulls[name].append(run(f"full-{i}", tasks, trials))
    n = tasks * trials - 1
    found: dict[str, PerRollout | None] = {}
    for name in tools:
        extra = min(c.wall for c in fulls[name]) - min(c.wall for c in ones[name])
        extra_cpu = min(c.cpu for c in fulls[name]) - min(c.cpu for c in ones[name])
        rounds = (
            [(f.cpu - o.cpu) / n for f, o in zip(fulls[name], ones[name], strict=True)] if n > 0 else [0.0]
        )
        best = Cost(extra / n, max(extra_cpu, 0.0) / n) if extra > 0 and n > 0 else None
        found[name] = None if best is None else PerRollout(best, (min(rounds), max(rounds)), tuple(rounds))
    return found


def sleeps_add(run: Callable[[str, float], Cost]) -> tuple[float, float]:
    """A tool's whole wall with the sleeps, and what the sleeps add to the same rollouts without
    them: the better of REPEATS runs of each, taken in turns after one thrown away."""
    run("warm-up", 0.0)
    slept, awake = [], []
    for i in range(REPEATS):
        slept.append(run(f"sleep-{i}", W2_SLEEP))
        awake.append(run(f"awake-{i}", 0.0))
    best_slept, best_awake = min(c.wall for c in slept), min(c.wall for c in awake)
    return best_slept, best_slept - best_awake


def main() -> None:
    global REPEATS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--workloads", default="w1,w2,w3", help="which to run, e.g. w2")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="rounds, the better kept")
    parser.add_argument("--peers", help="W1's peers to run, e.g. plain,inspect_ai (default: all)")
    parser.add_argument("--old", help="a folder holding the package before a change (W1)")
    parser.add_argument(
        "--tmp", help="where the projects are made (default: the system's temp folder), e.g. /dev/shm"
    )
    args = parser.parse_args()
    REPEATS = args.repeats
    peers = None if args.peers is None else set(args.peers.split(","))
    old = None if args.old is None else str(Path(args.old).resolve())
    chosen = set(args.workloads.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-peers-", dir=args.tmp))
    if "w1" in chosen:
        w1(tmp, args.tasks, args.trials, peers, old)
    if "w2" in chosen:
        w2(tmp)
    if "w3" in chosen:
        print(
            "W3 resume with every rollout persisted: pytest-capevolve only (python benchmarks/scale.py prints it);"
        )
        print("  no peer skips persisted per-rollout results on a re-run, so there is no ratio to print")


def w1(tmp: Path, tasks: int, trials: int, peers: set[str] | None, old: str | None) -> None:
    print(f"W1 no-op per rollout ({tasks} tasks × {trials} trials; whole process less one rollout's)")
    tools: dict[str, Callable[[str, int, int], Cost]] = {
        "pytest-capevolve": lambda name, n, k: ours(tmp, f"w1-{name}", n, k, 0.0),
    }
    if old is not None:
        tools["capevolve (old)"] = lambda name, n, k: ours(tmp, f"w1-old-{name}", n, k, 0.0, old=old)
    tools["plain pytest"] = lambda name, n, k: plain(tmp, f"plain-{name}", PLAIN, n, k)
    skipped = []
    wanted = peers if peers is not None else {"plain", "pytest-probability", "inspect_ai"}
    if "plain" not in wanted:
        del tools["plain pytest"]
    if "pytest-probability" not in wanted:
        pass
    elif have("pytest_probability"):
        tools["pytest-probability"] = lambda name, n, k: probability(tmp, f"prob-{name}", n, k)
    else:
        skipped.append("pytest-probability:  skipped (not installed: pip install pytest-probability)")
    if "inspect_ai" not in wanted:
        pass
    elif have("inspect_ai"):
        tools["inspect_ai"] = lambda name, n, k: inspect(tmp, f"inspect-{name}", n, k, 0.0, 64)
    else:
        skipped.append("inspect_ai:          skipped (not installed: pip install inspect-ai)")
    found = per_rollout(tools, tasks, trials)
    mine = found["pytest-capevolve"]
    for name, each in found.items():
        if each is None:
            print(f"  {name + ':':<21}within the noise of its start-up: raise --tasks")
            continue
        low, high = each.cpu_spread
        figures = (
            f"{each.best.wall * 1e6:8.0f} µs wall, {each.best.cpu * 1e6:8.0f} µs CPU per rollout "
            f"(rounds {low * 1e6:.0f}–{high * 1e6:.0f})"
        )
        ratio = ""
        if mine is not None and name != "pytest-capevolve":
            cpu = f"{mine.best.cpu / each.best.cpu:.2f}x" if each.best.cpu > 0 else "n/a"
            ratio = f"  (ours {mine.best.wall / each.best.wall:.2f}x theirs in wall, {cpu} in CPU"
            ratio += f"{_paired(mine.cpu_rounds, each.cpu_rounds)})"
        print(f"  {name + ':':<21}{figures}{ratio}")
    for line in skipped:
        print(f"  {line}")


def _paired(ours: tuple[float, ...], theirs: tuple[float, ...]) -> str:
    """The median of ours / theirs taken round by round (a round runs every tool in turn, so a change of
    load falls on both figures of a pair), and its range: steadier under load than best against best."""
    pairs = sorted(a / b for a, b in zip(ours, theirs, strict=True) if b > 0)
    if len(pairs) < 2:
        return ""
    return f"; paired by round: median {statistics.median(pairs):.2f}x, {pairs[0]:.2f}-{pairs[-1]:.2f}"


W2_COUNT, W2_SLEEP, W2_WIDTH = 512, 0.1, 64


def w2(tmp: Path) -> None:
    """Each tool's whole wall with the sleeps, and what the sleeps add to the same rollouts
    without them: below the ideal means the sleeps overlapped the tool's own per-rollout work."""
    ideal = W2_COUNT * W2_SLEEP / W2_WIDTH
    print(
        f"W2 IO-bound in flight ({W2_COUNT} rollouts × {W2_SLEEP * 1000:.0f} ms, {W2_WIDTH} at once; "
        f"ideal {ideal:.2f}s)"
    )
    flight = ["--capevolve-concurrency", str(W2_WIDTH)]
    mine, mine_added = sleeps_add(lambda name, sleep: ours(tmp, f"w2-{name}", W2_COUNT, 1, sleep, *flight))
    print(f"  pytest-capevolve:    {mine:8.2f} s whole; {_added(mine_added, ideal)}")
    if have("inspect_ai"):
        theirs, theirs_added = sleeps_add(
            lambda name, sleep: inspect(tmp, f"w2-inspect-{name}", W2_COUNT, 1, sleep, W2_WIDTH)
        )
        print(
            f"  inspect_ai:          {theirs:8.2f} s whole; {_added(theirs_added, ideal)}; "
            f"ours {mine / theirs:.2f}x theirs whole"
        )
    else:
        print("  inspect_ai:          skipped (not installed: pip install inspect-ai)")


def _added(seconds: float, ideal: float) -> str:
    if seconds <= 0:  # sleeping cannot make a run faster: the two runs differ by noise alone
        return "the sleeps add nothing measurable (within the noise)"
    return f"the sleeps add {seconds:.2f}s ({seconds / ideal:.2f}x ideal)"


if __name__ == "__main__":
    main()
