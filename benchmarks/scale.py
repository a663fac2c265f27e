"""The run dir at scale: 10,000 tasks × 3 trials × 2 tags (60,000 rollouts) of a no-op agent.

Run: python benchmarks/scale.py [--tasks N] [--project DIR]   (default 10000; figures are ratios
against baselines measured in the same run, because these machines are shared and noisy;
``--project`` reuses a project an earlier run of this script made and prints only 6 and 7)

1. Fresh run: wall per rollout of `pytest --capevolve-run` (whole process), against a bare loop
   calling the adapter and writing the same records atomically.
2. Peak memory per item: the fresh run's peak RSS less the resume's (same process, no items),
   over the rollouts (goal ≤ 2 KB).
3. Resume with everything persisted: the same command again (goal ≤ 1.5 s), beside a bare
   `pytest` session on one trivial test (the interpreter + pytest's own start-up).
4. `capevolve gate cand` and `capevolve measure --no-finalize` (goal ≤ 1 s each), beside
   `capevolve --help` (the interpreter + the CLI's start-up).
5. When PYTHONDONTWRITEBYTECODE is set (as on these machines), 3 and 4 once more with Python's
   default bytecode cache, as a user's machine runs them.
6. `capevolve verify` (goal ≤ 1.5×) against a script that reads and parses every rollout file once.
7. `capevolve gate cand` (goal ≤ 1.1×) against a naive script: read every rollout file, per-task
   means with numpy, their mean delta.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from overhead import bare_loop, make_project  # noqa: E402

TRIALS = 3


def timed(
    command: list[str], cwd: Path, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None
) -> tuple[float, int]:
    """(wall seconds, peak RSS in KB) of one subprocess; ``ok``: the exit codes expected."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in ok:
        raise SystemExit(f"{' '.join(command)} failed: {process.stderr.read().decode()[-2000:]}")
    return wall, int(usage.ru_maxrss)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--project", type=Path, default=None)
    args = parser.parse_args()
    if args.project is not None:
        reads(args.project.resolve(), [str(Path(sys.executable).parent / "capevolve")])
        return
    tasks = args.tasks
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-scale-"))
    os.environ.update(BENCH_TASKS=str(tasks), BENCH_SLEEP="0")
    project = make_project(tmp / "scale", TRIALS)
    (project / "cand").mkdir()
    (project / "cand" / "prompt.md").write_text("hello again\n")
    rollouts = tasks * TRIALS * 2
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    run_cmd = [*pytest_cmd, "--capevolve-run", str(project), "--capevolve-candidate", str(project / "cand")]
    cli = [str(Path(sys.executable).parent / "capevolve")]

    bare = 2 * bare_loop(project, tasks, TRIALS)  # two tags' worth
    fresh, fresh_rss = timed(run_cmd, project)
    resume, resume_rss = timed(run_cmd, project)
    trivial = tmp / "trivial"
    trivial.mkdir()
    (trivial / "test_one.py").write_text("def test_one():\n    pass\n")
    bare_pytest, _ = timed([*pytest_cmd, str(trivial)], trivial)
    gate, _ = timed([*cli, "gate", "cand", "--project", str(project)], project, ok=(0, 10))  # 10: reject
    measure, _ = timed([*cli, "measure", str(project), "--no-finalize"], project)
    cli_start, _ = timed([*cli, "--help"], project)

    per_bare, per_fresh = bare / rollouts, fresh / rollouts
    per_item = (fresh_rss - resume_rss) * 1024 / rollouts
    print(f"{tasks} tasks × {TRIALS} trials × 2 tags = {rollouts} rollouts, no-op agent")
    print(f"  bare loop:                {per_bare * 1e6:8.1f} µs/rollout")
    print(
        f"  fresh run (whole process):{per_fresh * 1e6:8.1f} µs/rollout  "
        f"({per_fresh / per_bare:.1f}x bare; wall {fresh:.1f}s)"
    )
    print(
        f"  peak memory per item:     {per_item:8.0f} B   (peak RSS {fresh_rss / 1024:.0f} MB fresh, "
        f"{resume_rss / 1024:.0f} MB resume)"
    )
    print(
        f"  resume, all persisted:    {resume:8.2f} s   ({resume / bare_pytest:.1f}x a bare pytest "
        f"session's {bare_pytest:.2f}s)"
    )
    print(
        f"  capevolve gate:           {gate:8.2f} s   ({gate / cli_start:.1f}x capevolve --help {cli_start:.2f}s)"
    )
    print(f"  capevolve measure:        {measure:8.2f} s   ({measure / cli_start:.1f}x capevolve --help)")
    reads(project, cli)
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        package = Path(__file__).resolve().parent.parent / "pytest_capevolve"
        if any(package.rglob("__pycache__")):
            print(
                f"  (note: {package} holds __pycache__ from an earlier run with the default cache, so the"
                " figures above read part of our bytecode from it; delete it for uncached figures)"
            )
        cached_start_up(project, run_cmd, [*pytest_cmd, str(trivial)], cli)


READ_ONCE = """
import glob, json, sys
for path in glob.glob(sys.argv[1] + "/.capevolve/runs/*/rollouts/*/*.json"):
    with open(path, "rb") as handle:
        json.loads(handle.read())
"""

NAIVE_GATE = """
import glob, json, sys
from collections import defaultdict
import numpy as np
rewards = defaultdict(lambda: defaultdict(list))
for path in glob.glob(sys.argv[1] + "/.capevolve/runs/*/rollouts/val/*.json"):
    with open(path, "rb") as handle:
        record = json.loads(handle.read())
    rewards[record["tag"]][record["task_id"]].append(record["reward"])
tasks = sorted(rewards["seed"])
means = {tag: np.array([np.mean(rewards[tag][t]) for t in tasks]) for tag in ("seed", "cand")}
print(float(np.mean(means["cand"] - means["seed"])))
"""


def reads(project: Path, cli: list[str]) -> None:
    """6 and 7: the commands that read the whole run, against one naive read of it, interleaved
    (each pair back to back, twice; the better of each is kept) so the machine's load hits both."""
    walls: dict[str, list[float]] = {name: [] for name in ("verify", "read", "gate", "naive")}
    for _ in range(2):
        walls["read"].append(timed([sys.executable, "-c", READ_ONCE, str(project)], project)[0])
        walls["verify"].append(timed([*cli, "verify", str(project)], project)[0])
        walls["naive"].append(timed([sys.executable, "-c", NAIVE_GATE, str(project)], project)[0])
        walls["gate"].append(timed([*cli, "gate", "cand", "--project", str(project)], project, ok=(0, 10))[0])
    best = {name: min(values) for name, values in walls.items()}
    print(
        f"  capevolve verify:         {best['verify']:8.2f} s   ({best['verify'] / best['read']:.2f}x one read "
        f"and parse of every rollout file, {best['read']:.2f}s)"
    )
    print(
        f"  capevolve gate:           {best['gate']:8.2f} s   ({best['gate'] / best['naive']:.2f}x a naive "
        f"read-every-file-and-numpy script, {best['naive']:.2f}s)"
    )


def cached_start_up(project: Path, run_cmd: list[str], bare_cmd: list[str], cli: list[str]) -> None:
    """The start-up bound figures again with Python's default bytecode cache.

    This environment sets PYTHONDONTWRITEBYTECODE, so every process above compiled our modules
    (and pytest rewrote their asserts: they belong to a pytest11 plugin) from source; a user's
    Python caches both in __pycache__ after the first run. One warm-up run of each command
    fills the cache; the figures are the run after it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # a cache folder of its own, filled by the warm-up runs: the package's folders stay without
    # __pycache__, so the figures above stay uncached the next time this script runs
    env["PYTHONPYCACHEPREFIX"] = str(project.parent / "bytecode")
    commands = {
        "resume, all persisted": (run_cmd, (0,)),
        "bare pytest session": (bare_cmd, (0,)),
        "capevolve gate": ([*cli, "gate", "cand", "--project", str(project)], (0, 10)),
        "capevolve measure": ([*cli, "measure", str(project), "--no-finalize"], (0,)),
        "capevolve --help": ([*cli, "--help"], (0,)),
    }
    walls = {}
    for name, (command, ok) in commands.items():
        timed(command, project, ok=ok, env=env)  # warm-up: writes the caches
        walls[name] = timed(command, project, ok=ok, env=env)[0]
    print("  with Python's default bytecode cache (this environment sets PYTHONDONTWRITEBYTECODE):")
    print(
        f"  resume, all persisted:    {walls['resume, all persisted']:8.2f} s   "
        f"({walls['resume, all persisted'] / walls['bare pytest session']:.1f}x a bare pytest session's "
        f"{walls['bare pytest session']:.2f}s)"
    )
    for name in ("capevolve gate", "capevolve measure"):
        print(
            f"  {name + ':':<26}{walls[name]:8.2f} s   ({walls[name] / walls['capevolve --help']:.1f}x "
            f"capevolve --help {walls['capevolve --help']:.2f}s)"
        )


if __name__ == "__main__":
    main()
