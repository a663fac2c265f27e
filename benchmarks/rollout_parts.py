"""Where a W1 rollout's CPU goes in the session's own process, piece by piece, as it runs there.

Run: .venv/bin/python benchmarks/rollout_parts.py [--rounds 3] [--old DIR] [--tmp /dev/shm]

A W1 session (``peers.py``'s no-op agent, 500 tasks × 4 trials, sent ahead at concurrency 1) with
this file loaded as a plugin (``-p rollout_parts``), which wraps the per-rollout steps of the
scoring process and sums the main thread's CPU (``time.thread_time``) inside each: a figure is
what that step costs *in the session*, its caches shared with pytest and the sandbox child, often
twice or three times what the same call costs in a loop of its own. Nested rows are part of the
row above them; the loop's row is the main process's whole run loop per rollout (the sandbox
child's CPU is not in it). Each wrap adds two clock reads (~1 µs) to the row it measures.
``--old DIR`` measures the package in ``DIR/pytest_capevolve`` in the same rounds (as peers.py).

``--syscalls``: instead, the system calls per rollout of the whole process tree (the sandbox child
included), by name: ``strace -c -f`` of the W1 session less the same of a 1 × 4 one. A count, not a
time: the same on a loaded machine as on a quiet one, so a change of one or two shows.
"""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any

PARTS: dict[str, list[float]] = {}
OUT_ENV = "CAPEVOLVE_BENCH_PARTS"


def _wrap(owner: Any, name: str, label: str) -> None:
    method = getattr(owner, name, None)
    if method is None:  # a step the package measured (--old) does not have: its row says "—"
        return

    @functools.wraps(method)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return method(*args, **kwargs)
        finally:
            part = PARTS.setdefault(label, [0.0, 0])
            part[0] += time.thread_time() - start
            part[1] += 1

    setattr(owner, name, timed)


LOOP = "main process, run loop"
# (module, owner, method, row): a row's nested rows follow it, indented
STEPS = (
    ("pytest_capevolve._items.nodes", "RolloutItem", "runtest", "RolloutItem.runtest"),
    (
        "pytest_capevolve._engine.sandbox",
        "Sandboxes",
        "run",
        "  Sandboxes.run (the round trip, the next sent ahead)",
    ),
    (
        "pytest_capevolve._engine.sandbox_process",
        "Sandbox",
        "_collect_ahead",
        "    Sandbox._collect_ahead (read, decode)",
    ),
    (
        "pytest_capevolve._engine.candidate_bytes",
        "CandidateBytes",
        "changed_during",
        "    changed_during (stamp)",
    ),
    ("pytest_capevolve._engine.sandbox", "Sandboxes", "send_all_ahead", "    Sandboxes.send_all_ahead"),
    ("pytest_capevolve._engine.sandbox", "Sandboxes", "send_ahead", "    Sandboxes.send_ahead (one)"),
    ("pytest_capevolve._items.nodes", "RolloutItem", "_record", "  RolloutItem._record"),
    (
        "pytest_capevolve._store.rollouts.rollout_files",
        "RolloutFiles",
        "record_rollout",
        "RolloutFiles.record_rollout",
    ),
    ("pytest_capevolve._store.files", "RunLock", "__enter__", "  RunLock.__enter__"),
    (
        "pytest_capevolve._store.rollouts.rollout_files",
        "RolloutFiles",
        "_write_rollout",
        "  RolloutFiles._write_rollout",
    ),
    ("pytest_capevolve._store.log.events", "EventLog", "append_event", "  EventLog.append_event"),
    ("pytest_capevolve._store.rollouts.rollout_files", "RolloutFiles", "flush", "  RolloutFiles.flush"),
)


def _wrap_all() -> None:
    import importlib

    for module, owner, name, label in STEPS:
        _wrap(getattr(importlib.import_module(module), owner), name, label)


if os.environ.get(OUT_ENV):
    _wrap_all()
    _loop: dict[str, float] = {}

    def pytest_runtestloop(session: Any) -> None:
        _loop["start"] = time.process_time()

    def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
        _loop["last"] = time.process_time()
        _loop["items"] = _loop.get("items", 0) + 1

    def pytest_unconfigure(config: Any) -> None:
        loop = [_loop.get("last", 0.0) - _loop.get("start", 0.0), int(_loop.get("items", 0))]
        with open(os.environ[OUT_ENV], "w") as out:
            json.dump({LOOP: loop, **PARTS}, out)


def main() -> None:
    import argparse
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from overhead import make_project

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", help="a folder holding the package before a change")
    parser.add_argument("--tmp", help="where the projects are made (default: the system's temp folder)")
    parser.add_argument("--syscalls", action="store_true", help="count system calls per rollout (strace)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-parts-", dir=args.tmp))
    here = str(Path(__file__).resolve().parent)
    sides = {"new": None} if args.old is None else {"new": None, "old": str(Path(args.old).resolve())}
    tasks, trials = 500, 4
    if args.syscalls:
        syscalls(tmp, sides, tasks, trials)
        return
    found: dict[str, list[dict[str, list[float]]]] = {side: [] for side in sides}
    for r in range(args.rounds):
        for side, old in sides.items():
            project = make_project(tmp / f"{side}-{r}", trials)
            out = tmp / f"{side}-{r}.json"
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            path = [p for p in (old, here, env.get("PYTHONPATH")) if p]
            env.update(
                BENCH_TASKS=str(tasks),
                BENCH_SLEEP="0",
                PYTHONPATH=os.pathsep.join(path),
                **{OUT_ENV: str(out)},
            )
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "rollout_parts"]
            subprocess.run(
                [*command, "--capevolve-run", str(project)],
                cwd=project,
                env=env,
                check=True,
                capture_output=True,
            )
            found[side].append(json.loads(out.read_text()))
    n = tasks * trials
    print(f"W1 per rollout, main thread CPU in the session (µs; best of {args.rounds} rounds, {n} rollouts):")
    labels = [LOOP, *(step[3] for step in STEPS)]
    print(f"  {'':58s}" + "".join(f"{side:>9s}" for side in sides))
    for label in labels:
        row = [min((run[label][0] for run in found[side] if label in run), default=None) for side in sides]
        print(f"  {label:58s}" + "".join("        —" if v is None else f"{v / n * 1e6:9.1f}" for v in row))


def syscalls(tmp: Any, sides: dict[str, str | None], tasks: int, trials: int) -> None:
    """Per side: system calls per rollout by name, (tasks × trials) less (1 × trials)."""
    import shutil
    import subprocess

    from overhead import make_project, session_command

    if shutil.which("strace") is None:
        raise SystemExit("--syscalls needs strace (apt-get install strace)")

    def counted(side: str, old: str | None, n: int) -> dict[str, int]:
        project = make_project(tmp / f"sc-{side}-{n}", trials)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(BENCH_TASKS=str(n), BENCH_SLEEP="0", PYTHONPATH=old or env.get("PYTHONPATH", ""))
        out = tmp / f"sc-{side}-{n}.txt"
        command = session_command(project)
        subprocess.run(
            ["strace", "-f", "-c", "-o", str(out), *command],
            cwd=project,
            env=env,
            check=True,
            capture_output=True,
        )
        rows = [line.split() for line in out.read_text().splitlines()]
        # a row: % time, seconds, usecs/call, calls, [errors,] name
        return {
            row[-1]: int(row[3])
            for row in rows
            if len(row) in (5, 6) and row[3].isdigit() and row[-1] != "total"
        }

    n = tasks * trials - trials
    print(f"W1 system calls per rollout, whole process tree ({tasks} × {trials} less 1 × {trials}):")
    for side, old in sides.items():
        full, one = counted(side, old, tasks), counted(side, old, 1)
        per = {name: (full.get(name, 0) - one.get(name, 0)) / n for name in full.keys() | one.keys()}
        shown = ", ".join(
            f"{name} {v:.2f}" for name, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= 0.05
        )
        print(f"  {side}: {sum(per.values()):.1f}  ({shown})")


if __name__ == "__main__":
    main()
