"""Rollouts in flight within one process (`--capevolve-concurrency K`) against a plain pool.

Run: python benchmarks/fanout.py   (figures are ratios against baselines measured in the same
run, because these machines are shared and noisy)

200 rollouts of an agent that waits 0.1 s — `time.sleep` (a sync adapter, on threads) and
`asyncio.sleep` (an async adapter, on one event loop) — at 16, 32 and 64 in flight:

- `pytest --capevolve-run P --capevolve-concurrency K` (one process);
- the baseline: a plain `ThreadPoolExecutor(K)` calling the same adapter's run_target and
  score (and, for the async adapter, `asyncio.gather` under a `Semaphore(K)` as well), each in
  a process of its own;
- once, `-n 16` xdist workers at K = 1: what fanning out by processes costs.

Figures: the rollout phase — from the first run_target start to the last result in hand (the
last report on the controller: a `-p` plugin logs it; for the pools, the end of the map) —
against the ideal 200 × 0.1 / K (goal ≤ 1.5 at 64), the whole process's wall time, and the
peak of the summed RSS of the process and all its children (read from /proc every 20 ms; goal
≤ 400 MB at 64). Results reach pytest one at a time, in order, on the main thread, so the
phase cannot beat (200 − K) × c + 0.1 s, where c is the session's main-thread cost per item
(running its protocol, building and persisting its record): measured here by a session of
200 no-wait rollouts, once more with the run-dir write stubbed out (its share of c), and
printed as that bound. If inspect-ai is installed, say so: it is not
run here (no network).

Two narrower runs (issue 40, items 5 and 6), each printing ratios measured in the same run:

- `python benchmarks/fanout.py --burners 4 [--repeat 5]`: the async adapter against the sync one at
  64 in flight, with 4 busy-loop processes competing for the CPUs, alternated `--repeat` times;
  prints each pair and the median of async phase / sync phase (goal ≤ 1.1), and of their CPU (the
  rusage of each session's process tree: on a shared machine the figure that load does not move);
- `python benchmarks/fanout.py --xdist [--repeat 20]`: `-n 2 --capevolve-concurrency 32` against a
  64-thread pool, `--repeat` times; prints each ratio, the median (goal ≤ 2), and any session
  whose process wall is over 2× the median of them (a stall), with its CPU and the machine's CPU
  pressure (PSI: the share of its wall time in which a runnable task waited for a CPU — near
  100 %, a long session was starved by its neighbours, and its CPU says whether it did more).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROLLOUTS, WAIT_S, WIDTHS = 200, 0.1, (16, 32, 64)

ADAPTER = """
import asyncio, os, threading, time
from pathlib import Path
from pytest_capevolve import Rollout, Score, Task

LOG = Path(__file__).with_name("observed") / "phase.log"  # the spec's sandbox_writable
DONE = Path(__file__).with_name("reported.log")
_lock = threading.Lock()


def _log(started):
    with _lock, open(LOG, "a") as handle:
        handle.write(f"{started} {time.time()}\\n")


class SleepAdapter:
    def tasks(self, split):
        return [Task(id=f"t{i:04d}", input=i, target=i) for i in range(int(os.environ["BENCH_TASKS"]))]

    def run_target(self, task, ctx, *, seed):
        started = time.time()
        time.sleep(float(os.environ["BENCH_WAIT"]))
        _log(started)
        return Rollout(task_id=task.id, output=task.input)

    def score(self, task, rollout):
        return Score(reward=1.0 if rollout.output == task.target else 0.0)


class AsyncSleepAdapter(SleepAdapter):
    async def run_target(self, task, ctx, *, seed):
        started = time.time()
        await asyncio.sleep(float(os.environ["BENCH_WAIT"]))
        _log(started)
        return Rollout(task_id=task.id, output=task.input)
"""
SPEC = """adapter: adapter.py:{adapter}
capability_path: capability
split_train: 0.0
split_val: 1.0
split_test: 0.0
num_trials: 1
sandbox_writable: [observed]
"""
THREAD_POOL = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import adapter

agent, width, ctx = adapter.SleepAdapter(), int(sys.argv[2]), Path(sys.argv[1]) / "capability"

def one(task):
    return agent.score(task, agent.run_target(task, ctx, seed=0))

with ThreadPoolExecutor(width) as pool:
    list(pool.map(one, agent.tasks("all")))
adapter.DONE.write_text(str(time.time()))
"""
GATHER = """
import asyncio, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import adapter

agent, width, ctx = adapter.AsyncSleepAdapter(), int(sys.argv[2]), Path(sys.argv[1]) / "capability"

async def main():
    slots = asyncio.Semaphore(width)

    async def one(task):
        async with slots:
            return agent.score(task, await agent.run_target(task, ctx, seed=0))

    await asyncio.gather(*(one(t) for t in agent.tasks("all")))

asyncio.run(main())
adapter.DONE.write_text(str(time.time()))
"""
PHASE_END = """
import time
from pathlib import Path

LAST = [0.0]


def pytest_runtest_logreport(report):
    if report.when == "call":
        LAST[0] = time.time()


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):  # the controller, which persists
        Path(__file__).parent.with_name(Path(__file__).parent.name[: -len("-plugins")]).joinpath(
            "reported.log"
        ).write_text(str(LAST[0]))
"""


# A diagnostic only: how much of c is the run dir's write per rollout (issue 13, part 2).
NO_PERSIST = """
def pytest_configure(config):
    from pytest_capevolve._session import persistence

    persistence.Persistence._persist = lambda self, record, text: record
"""


def make_project(root: Path, adapter: str) -> Path:
    root.mkdir(parents=True)
    (root / "adapter.py").write_text(ADAPTER)
    # the -p plugins sit beside the project: a plugin inside it would be outside the harness lock
    plugins(root).mkdir()
    (plugins(root) / "phase_end.py").write_text(PHASE_END)
    (plugins(root) / "no_persist.py").write_text(NO_PERSIST)
    (root / "capevolve.yaml").write_text(SPEC.format(adapter=adapter))
    (root / "capability").mkdir()
    (root / "observed").mkdir()
    (root / "capability" / "prompt.md").write_text("hello\n")
    return root


def plugins(project: Path) -> Path:
    return project.with_name(f"{project.name}-plugins")


def tree_rss(root: int) -> int:
    """Bytes resident in ``root`` and all its descendants, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in tree:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except OSError:
            continue
    return total


def cpu_pressure() -> float:
    """Seconds, machine-wide, in which some runnable task waited for a CPU (PSI; 0 where absent)."""
    try:
        return int(Path("/proc/pressure/cpu").read_text().split("total=")[1].split()[0]) / 1e6
    except (OSError, IndexError, ValueError):
        return 0.0


def measure(command: list[str], project: Path, ok: tuple[int, ...] = (0,)) -> dict[str, float]:
    """Run ``command``; its whole wall time, its rollout phase and its peak summed RSS."""
    log = project / "observed" / "phase.log"
    log.unlink(missing_ok=True)
    (project / "reported.log").unlink(missing_ok=True)
    # pytest's numbered temp folders in a root of the benchmark's own: a session under xdist
    # makes one (for its workers' basetemp) and, as it ends, deletes the oldest in its root —
    # in the shared /tmp/pytest-of-<user>, another pytest's tree (98,614 files, seen by
    # py-spy: 9 s of one session's wall time after its last rollout), charged to this session
    temp_root = project.with_name(f"{project.name}-pytest-temp")
    temp_root.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(project), str(plugins(project)), os.environ.get("PYTHONPATH", "")]
        ),
        "PYTEST_DEBUG_TEMPROOT": str(temp_root),
    }
    before, pressed = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_pressure()
    started, began = time.perf_counter(), time.time()
    proc = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(0.02)  # a sampling interval, not synchronization

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - started
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the process and every descendant it reaped
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # the share of the session's wall time in which the machine had more runnable tasks than CPUs:
    # near 100 %, a long session was starved by its neighbours, not stalled
    pressure = (cpu_pressure() - pressed) / wall
    if proc.returncode not in ok or not (project / "reported.log").is_file():
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{err.decode()[-2000:]}")
    spans = [tuple(map(float, line.split())) for line in log.read_text().splitlines()]
    assert len(spans) == int(os.environ["BENCH_TASKS"]), len(spans)
    first = min(start for start, _ in spans)
    phase = float((project / "reported.log").read_text()) - first
    return {
        "wall": wall,
        "phase": phase,
        "mb": peak[0] / 2**20,
        "lead": first - began,
        "cpu": cpu,
        "pressure": pressure,
    }


def session(project: Path, *extra: str) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--capevolve-run",
        str(project),
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    # a new run each time, so the session pays every rollout again. Not by deleting the old
    # runs: on this machine's ext4 (no journal) a file created right after thousands were
    # deleted waits while the kernel skips their recently freed inodes (~0.5 ms per rollout
    # file, measured), which would be charged to the session
    return [*command, "--capevolve-new-run", "-p", "phase_end", *extra]


def fresh(project: Path) -> Path:
    """The project, whose next session starts a new run (see :func:`session`)."""
    return project


def row(name: str, figures: dict[str, float], ideal: float, baseline: dict[str, float]) -> str:
    return (
        f"  {name:<34} phase {figures['phase']:5.2f}s = {figures['phase'] / ideal:4.2f}x ideal"
        f" ({figures['phase'] / baseline['phase']:4.2f}x pool)   process {figures['wall']:5.2f}s"
        f"   memory {figures['mb']:6.1f} MB ({figures['mb'] / baseline['mb']:4.1f}x pool)"
    )


def burning(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` processes spinning on a CPU each, until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def cache_bytecode(tmp: Path) -> None:
    """Sessions read their imports' bytecode from a cache of the benchmark's own
    (``PYTHONPYCACHEPREFIX``), as on a user's machine, where startup.py and scale.py already do. A
    shell with ``PYTHONDONTWRITEBYTECODE=1`` (these machines') and a venv installed
    ``--no-compile`` keep none: each process a session starts — the controller, every xdist
    worker, every sandbox child — compiled every module it imported: a third of a 1,000-rollout
    ``-n 2`` session's CPU (6.7 → 4.4 s; 2,000 rollouts, medians: 10.4 → 7.1 s)."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")


def warm(*commands: tuple[list[str], Path]) -> None:
    """Each command once, unmeasured: it fills the bytecode cache (:func:`cache_bytecode`)."""
    for command, project in commands:
        measure(command, project)


def under_load(burners: int, repeat: int, rollouts: int) -> None:
    """Item 5: async against sync at 64 in flight, under ``burners`` busy processes."""
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-fanout-"))
    os.environ.update(BENCH_TASKS=str(rollouts), BENCH_WAIT=str(WAIT_S))
    sync = make_project(tmp / "sync", "SleepAdapter")
    asyn = make_project(tmp / "async", "AsyncSleepAdapter")
    cache_bytecode(tmp)
    warm(*((session(p, "--capevolve-concurrency", "64"), p) for p in (sync, asyn)))
    ideal = rollouts * WAIT_S / 64
    ratios, cpu_ratios = [], []
    print(f"{rollouts} rollouts × {WAIT_S} s at 64 in flight, {burners} busy processes; ideal {ideal:.2f}s")
    spinning = burning(burners)
    try:
        for _ in range(repeat):
            threads = measure(session(sync, "--capevolve-concurrency", "64"), sync)
            loop = measure(session(asyn, "--capevolve-concurrency", "64"), asyn)
            ratios.append(loop["phase"] / threads["phase"])
            print(
                f"  sync {threads['phase']:5.2f}s = {threads['phase'] / ideal:4.2f}x ideal"
                f"   async {loop['phase']:5.2f}s = {loop['phase'] / ideal:4.2f}x ideal"
                f"   async/sync {ratios[-1]:4.2f}   CPU per rollout (process tree): sync"
                f" {threads['cpu'] / rollouts * 1e3:5.2f} ms, async {loop['cpu'] / rollouts * 1e3:5.2f} ms"
            )
            cpu_ratios.append(loop["cpu"] / threads["cpu"])
    finally:
        for proc in spinning:
            proc.kill()
            proc.wait()
    print(
        f"median async/sync at 64 in flight under {burners} busy processes: {statistics.median(ratios):.2f} (goal ≤ 1.1)"
    )
    print(f"median async/sync CPU of the process tree: {statistics.median(cpu_ratios):.2f}")


def xdist_repeats(repeat: int, rollouts: int) -> None:
    """Item 6: ``-n 2 × 32`` against a 64-thread pool, ``repeat`` times, and any stall."""
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-fanout-"))
    os.environ.update(BENCH_TASKS=str(rollouts), BENCH_WAIT=str(WAIT_S))
    sync = make_project(tmp / "sync", "SleepAdapter")
    (tmp / "pool.py").write_text(THREAD_POOL)
    cache_bytecode(tmp)
    pool_command = [sys.executable, str(tmp / "pool.py"), str(sync), "64"]
    warm((pool_command, sync), (session(sync, "-n", "2", "--capevolve-concurrency", "32"), sync))
    ratios, walls, pressures = [], [], []
    print(f"{rollouts} rollouts × {WAIT_S} s: -n 2 --capevolve-concurrency 32 against ThreadPoolExecutor(64)")
    for i in range(repeat):
        pool = measure(pool_command, sync)
        workers = measure(session(sync, "-n", "2", "--capevolve-concurrency", "32"), sync)
        ratios.append(workers["phase"] / pool["phase"])
        walls.append(workers["wall"])
        print(
            f"  {i:2d}: pool {pool['phase']:5.2f}s   -n 2 × 32 {workers['phase']:5.2f}s"
            f" ({ratios[-1]:4.2f}x pool)   process {workers['wall']:5.2f}s,"
            f" {workers['lead']:5.2f}s of it before the first rollout, CPU {workers['cpu']:5.2f}s"
            f" (pool {pool['cpu']:5.2f}s), CPU pressure {workers['pressure']:4.0%}"
        )
        pressures.append(workers["pressure"])
    typical = statistics.median(walls)
    stalls = [
        f"{i}: {w:.1f}s (CPU pressure {pressures[i]:.0%})" for i, w in enumerate(walls) if w > 2 * typical
    ]
    print(f"median -n 2 × 32 / 64-thread pool: {statistics.median(ratios):.2f} (goal ≤ 2)")
    print(f"stalls (process wall > 2× the median {typical:.1f}s): {', '.join(stalls) or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--burners", type=int, help="only async against sync at 64, under this many busy processes"
    )
    parser.add_argument("--xdist", action="store_true", help="only -n 2 × 32 against a 64-thread pool")
    parser.add_argument(
        "--repeat", type=int, help="how many times (default 5 with --burners, 20 with --xdist)"
    )
    parser.add_argument(
        "--rollouts", type=int, default=ROLLOUTS, help="rollouts per session with --burners or --xdist"
    )
    args = parser.parse_args()
    if args.burners is not None:
        under_load(args.burners, args.repeat or 5, args.rollouts)
    elif args.xdist:
        xdist_repeats(args.repeat or 20, args.rollouts)
    else:
        everything()


def everything() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-fanout-"))
    os.environ.update(BENCH_TASKS=str(ROLLOUTS), BENCH_WAIT=str(WAIT_S))
    sync = make_project(tmp / "sync", "SleepAdapter")
    asyn = make_project(tmp / "async", "AsyncSleepAdapter")
    (tmp / "pool.py").write_text(THREAD_POOL)
    (tmp / "gather.py").write_text(GATHER)
    cache_bytecode(tmp)
    warm(
        *((session(p, "-n", "2", "--capevolve-concurrency", "16"), p) for p in (sync, asyn)),
        *(
            ([sys.executable, str(tmp / name), str(p), "16"], p)
            for name, p in (("pool.py", sync), ("gather.py", asyn))
        ),
    )
    results: dict[str, dict[str, float]] = {}
    print(f"{ROLLOUTS} rollouts × {WAIT_S} s; phase = first run_target start to last result in hand")
    os.environ["BENCH_WAIT"] = "0"
    per_item = measure(session(fresh(sync), "--capevolve-concurrency", "64"), sync)["phase"] / ROLLOUTS
    # nothing saved, so the session ends with its rollouts missing (exit 12)
    unsaved = measure(
        session(fresh(sync), "--capevolve-concurrency", "64", "-p", "no_persist"), sync, ok=(12,)
    )
    os.environ["BENCH_WAIT"] = str(WAIT_S)
    print(
        f"main-thread cost per item, c = {per_item * 1e3:.2f} ms (a session of {ROLLOUTS} no-wait rollouts)"
    )
    print(
        f"  of which persisting the rollout: {(per_item - unsaved['phase'] / ROLLOUTS) * 1e3:.2f} ms"
        f" (the same session with the run-dir write stubbed out: {unsaved['phase'] / ROLLOUTS * 1e3:.2f} ms)"
    )
    for width in WIDTHS:
        ideal = ROLLOUTS * WAIT_S / width
        bound = (ROLLOUTS - width) * per_item + WAIT_S
        pool = measure([sys.executable, str(tmp / "pool.py"), str(sync), str(width)], sync)
        gather = measure([sys.executable, str(tmp / "gather.py"), str(asyn), str(width)], asyn)
        threads = measure(session(fresh(sync), "--capevolve-concurrency", str(width)), sync)
        loop = measure(session(fresh(asyn), "--capevolve-concurrency", str(width)), asyn)
        print(
            f"{width} in flight (ideal {ideal:.2f}s; in-order reporting bound {bound:.2f}s = {bound / ideal:.2f}x)"
        )
        print(row("ThreadPoolExecutor (baseline)", pool, ideal, pool))
        print(row("asyncio.gather + Semaphore", gather, ideal, pool))
        print(row("capevolve, sync adapter (threads)", threads, ideal, pool))
        print(row("capevolve, async adapter (one loop)", loop, ideal, pool))
        results.update({f"pool-{width}": pool, f"threads-{width}": threads, f"async-{width}": loop})
    ideal = ROLLOUTS * WAIT_S / 16
    workers = measure(session(fresh(sync), "-n", "16"), sync)
    print(f"16 in flight as xdist workers, K = 1 each (ideal {ideal:.2f}s)")
    print(row("-n 16", workers, ideal, results["pool-16"]))
    print(row("--capevolve-concurrency 16 (above)", results["threads-16"], ideal, results["pool-16"]))
    print(
        f"  process wall, -n 16 / concurrency 16: {workers['wall'] / results['threads-16']['wall']:.1f}x;"
        f" memory: {workers['mb'] / results['threads-16']['mb']:.1f}x"
    )
    if importlib.util.find_spec("inspect_ai") is not None:
        print("inspect-ai is installed; it is not run here (this benchmark stays offline)")
    else:
        print("inspect-ai is not installed: no comparison with it")
    at64 = {k: results[f"{k}-64"] for k in ("threads", "async")}
    goals = {
        kind: {"phase_over_ideal": f["phase"] / (ROLLOUTS * WAIT_S / 64), "mb": f["mb"]}
        for kind, f in at64.items()
    }
    print("goal at 64 in flight: phase/ideal ≤ 1.5 and memory ≤ 400 MB:", json.dumps(goals))


if __name__ == "__main__":
    main()
