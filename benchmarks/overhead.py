"""Per-rollout overhead of the plugin path, and xdist fan-out against the ideal.

Run: python benchmarks/overhead.py   (figures are ratios against baselines measured in the
same run, because these machines are shared and noisy)

1. A no-op adapter: bare Python loop calling run_target + score and writing the same JSON
   record atomically, versus `pytest --capevolve-run` on the same adapter (in-process), less
   the session's start-up (the same command with --collect-only); three repeats, each side
   measured right before and right after the session; the median and the quietest ratio.
2. 200 rollouts of a 50 ms sleeping agent at `-n 8`, versus the ideal 200 × 0.05 / 8 s.
3. What candidate isolation (``run_target`` in a sandbox child, issue 24) costs per rollout:
   the same no-op session with the sandbox and without it (``_session_clock.py`` builds the
   runner in-process, as before issue 24), paired and in alternating order, N repeats. Two
   figures per repeat: the loop's wall time per rollout after the first (the first starts the
   child), and CPU per rollout — the session's and every process it started, the sandbox child
   included with its start-up, from ``getrusage`` — less a collect-only session's. Then
   ``run_and_score`` alone, through the sandbox and in-process, with the child's CPU read from
   /proc: what one round trip costs each side; and the round trip alone with K requests written
   at once (K = 1 and 8): the round trip alone, as sessions batch the requests they send ahead.

   python benchmarks/overhead.py --isolation [--repeats 7]   runs only this part
4. What the kernel boundary (issue 37: each sandbox child confined by Landlock before it loads the
   adapter) costs per rollout: the same sandboxed no-op session confined and with
   ``CAPEVOLVE_LANDLOCK=off``, paired and in alternating order; CPU per rollout of the session and
   every process it started (the child's start-up and its ``confine()`` included), less a
   collect-only session's; the ratio confined ÷ unconfined, goal ≤ 1.1x.

   python benchmarks/overhead.py --confinement [--repeats 5]   runs only this part
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ADAPTER = """
import os, time
from pytest_capevolve import Rollout
from pytest_capevolve import Score
from pytest_capevolve import Task

SLEEP = float(os.environ["BENCH_SLEEP"])

class Adapter:
    thread_safe = True  # stateless: its rollouts may overlap (at concurrency 1: sent ahead)

    def tasks(self, split):
        return [Task(id=f"t{i:04d}", input=i, target=i) for i in range(int(os.environ["BENCH_TASKS"]))]
    def run_target(self, task, ctx, *, seed):
        if SLEEP:  # a no-op agent returns at once: sleep(0) is a syscall that yields the CPU
            time.sleep(SLEEP)
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


def session_command(project: Path) -> list[str]:
    """``pytest --capevolve-run PROJECT`` as every benchmark starts it: quiet, no cache plugin."""
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--capevolve-run", str(project)]


def bare_loop(project: Path, tasks: int, trials: int, out: str = "bare") -> float:
    """The same work without pytest: call the adapter, write the same record atomically (into
    ``out``, relative to the project unless absolute)."""
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def clocked_session(
    project: Path, *, in_process: bool, collect_only: bool = False, env_extra: dict[str, str] | None = None
) -> tuple[dict, float]:
    """One ``pytest --capevolve-run`` on ``project`` with ``_session_clock``: its loop's clock
    and the CPU seconds of the session and everything it started (all reaped when it ends)."""
    clock = project / "clock.json"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        CAPEVOLVE_BENCH_CLOCK=str(clock),
        CAPEVOLVE_BENCH_IN_PROCESS="1" if in_process else "0",
        **(env_extra or {}),
    )
    before = _children_cpu()
    command = [sys.executable, "-m", "pytest", "-p", "_session_clock", "--capevolve-run", str(project)]
    command += ["-q", "-p", "no:cacheprovider", *(["--collect-only"] if collect_only else [])]
    subprocess.run(command, check=True, cwd=project, stdout=subprocess.DEVNULL, env=env)
    cpu = _children_cpu() - before
    return (json.loads(clock.read_text()) if clock.exists() else {}), cpu


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def isolation_sessions(tmp: Path, tasks: int, trials: int, repeats: int) -> dict[str, float]:
    """Section 3: the same session with and without the sandbox, paired repeats."""
    n = tasks * trials
    os.environ.update(BENCH_TASKS=str(tasks), BENCH_SLEEP="0")
    walls, cpus = [], []
    load_before = os.getloadavg()
    print(f"candidate isolation: {n} no-op rollouts a session, {repeats} paired repeats (alternating order)")
    for r in range(repeats):
        fixed = clocked_session(
            make_project(tmp / f"iso{r}_collect", trials), in_process=False, collect_only=True
        )[1]
        figures = {}
        for in_process in [r % 2 == 0, r % 2 == 1]:
            name = "in_process" if in_process else "isolated"
            clock, cpu = clocked_session(make_project(tmp / f"iso{r}_{name}", trials), in_process=in_process)
            figures[name] = (clock["steady"], max(cpu - fixed, 0.0) / n)
        (wall_in, cpu_in), (wall_iso, cpu_iso) = figures["in_process"], figures["isolated"]
        walls.append(wall_iso / wall_in)
        cpus.append(cpu_iso / max(cpu_in, 1e-9))
        print(
            f"  repeat {r + 1}: wall {wall_in * 1e6:6.1f} → {wall_iso * 1e6:6.1f} µs/rollout ({walls[-1]:.2f}x);"
            f" CPU {cpu_in * 1e6:6.1f} → {cpu_iso * 1e6:6.1f} µs/rollout ({cpus[-1]:.2f}x)",
            flush=True,
        )
    load_after = os.getloadavg()
    print(
        f"  isolated ÷ in-process per rollout: wall median {median(walls):.2f}x (range {min(walls):.2f}"
        f"–{max(walls):.2f}), CPU median {median(cpus):.2f}x (range {min(cpus):.2f}–{max(cpus):.2f});"
        " goal ≤ 1.2x"
    )
    print(f"  load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    return {"isolation_wall_ratio": median(walls), "isolation_cpu_ratio": median(cpus)}


def confinement_sessions(tmp: Path, tasks: int, trials: int, repeats: int) -> dict[str, float]:
    """Section 4: the sandboxed session confined and not (``CAPEVOLVE_LANDLOCK=off``), paired."""
    from pytest_capevolve._confine.landlock import abi

    n = tasks * trials
    os.environ.update(BENCH_TASKS=str(tasks), BENCH_SLEEP="0")
    os.environ.pop("CAPEVOLVE_LANDLOCK", None)
    if abi() < 1:
        print("confinement: this kernel offers no Landlock; nothing to compare")
        return {}
    print(f"confinement (Landlock ABI {abi()}): {n} no-op rollouts a session, {repeats} paired repeats")
    cpus, walls = [], []
    for r in range(repeats):
        fixed = clocked_session(
            make_project(tmp / f"conf{r}_collect", trials), in_process=False, collect_only=True
        )[1]
        figures = {}
        for confined in [r % 2 == 0, r % 2 == 1]:
            name = "confined" if confined else "unconfined"
            env = {} if confined else {"CAPEVOLVE_LANDLOCK": "off"}
            clock, cpu = clocked_session(
                make_project(tmp / f"conf{r}_{name}", trials), in_process=False, env_extra=env
            )
            figures[name] = (clock["steady"], max(cpu - fixed, 0.0) / n)
        (wall_off, cpu_off), (wall_on, cpu_on) = figures["unconfined"], figures["confined"]
        walls.append(wall_on / wall_off)
        cpus.append(cpu_on / max(cpu_off, 1e-9))
        print(
            f"  repeat {r + 1}: CPU {cpu_off * 1e6:6.1f} → {cpu_on * 1e6:6.1f} µs/rollout ({cpus[-1]:.3f}x);"
            f" wall {wall_off * 1e6:6.1f} → {wall_on * 1e6:6.1f} µs/rollout ({walls[-1]:.3f}x)",
            flush=True,
        )
    print(
        f"  confined ÷ unconfined per rollout: CPU median {median(cpus):.3f}x (range {min(cpus):.3f}–"
        f"{max(cpus):.3f}), wall median {median(walls):.3f}x; goal ≤ 1.1x"
    )
    return {"confinement_cpu_ratio": median(cpus), "confinement_wall_ratio": median(walls)}


def _cpu_of(pid: int) -> float:
    """CPU seconds of a running process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def isolation_round_trip(project: Path, rollouts: int, repeats: int) -> None:
    """``run_and_score`` alone, in-process and through the sandbox (its child started before
    timing), paired repeats: wall per rollout, and CPU per rollout on each side."""
    from pytest_capevolve._engine.runner import AdapterRunner, run_and_score
    from pytest_capevolve._engine.sandbox import isolated
    from pytest_capevolve._project.adapter import load_adapter, load_tasks

    adapter = load_adapter("adapter.py:Adapter", project)
    tasks = list(load_tasks(adapter, "adapter.py:Adapter").values())
    here, sandboxed = AdapterRunner(adapter), isolated(adapter, "adapter.py:Adapter", project)
    capability = project / "capability"
    run_and_score(sandboxed, tasks[0], capability, seed=0, split="val")  # start the child
    child = next(iter(sandboxed.targets._children.values())).proc  # type: ignore[attr-defined]
    with_proc = Path(f"/proc/{child.pid}/stat").exists()

    def timed(runner: AdapterRunner) -> tuple[float, float, float]:
        child_before = _cpu_of(child.pid) if with_proc and runner is sandboxed else 0.0
        start, cpu = time.perf_counter(), time.process_time()
        for n in range(rollouts):
            run_and_score(runner, tasks[n % len(tasks)], capability, seed=n, split="val", timeout_s=30.0)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        child_cpu = _cpu_of(child.pid) - child_before if with_proc and runner is sandboxed else 0.0
        return wall / rollouts, cpu / rollouts, child_cpu / rollouts

    pairs = [(timed(here), timed(sandboxed)) for _ in range(repeats)]
    sandboxed.close()
    wall_in = median([p[0][0] for p in pairs])
    wall_iso = median([p[1][0] for p in pairs])
    cpu_in = median([p[0][1] for p in pairs])
    parent, child_cpu = median([p[1][1] for p in pairs]), median([p[1][2] for p in pairs])
    print(f"  run_and_score alone, {rollouts} rollouts, median of {repeats} paired repeats:")
    print(f"    wall {wall_in * 1e6:.1f} µs in-process, {wall_iso * 1e6:.1f} µs through the sandbox")
    print(
        f"    CPU {cpu_in * 1e6:.1f} µs in-process; through the sandbox {parent * 1e6:.1f} µs here"
        f" + {child_cpu * 1e6:.1f} µs in the child" + ("" if with_proc else " (no /proc: not read)")
    )


def batched_round_trip(project: Path, rollouts: int, repeats: int, widths: tuple[int, ...] = (1, 8)) -> None:
    """What a batch of K requests per write to one sandbox child saves: the round trip alone (a
    session sends up to 8 ahead while rollouts are quick, session 30). The requests go out in one write, their
    answers are read in order; CPU per rollout on each side, the widths in turns, best of
    ``repeats``. No scoring: the round trip alone."""
    from pytest_capevolve._engine.runner import run_and_score
    from pytest_capevolve._engine.sandbox import isolated
    from pytest_capevolve._engine.sandbox_process import decode_answer
    from pytest_capevolve._engine.wire import HEADER
    from pytest_capevolve._project.adapter import load_adapter, load_tasks

    adapter = load_adapter("adapter.py:Adapter", project)
    tasks = list(load_tasks(adapter, "adapter.py:Adapter").values())
    runner = isolated(adapter, "adapter.py:Adapter", project)
    sandboxes, capability = runner.targets, project / "capability"
    run_and_score(runner, tasks[0], capability, seed=0, split="val")  # start the child
    sandbox = next(iter(sandboxes._children.values()))  # type: ignore[union-attr]
    child = sandbox.proc
    if not Path(f"/proc/{child.pid}/stat").exists():
        print("  batched round trip: no /proc here, not measured")
        runner.close()
        return
    best: dict[int, tuple[float, float]] = {}
    for _ in range(repeats):
        for width in widths:
            child_before, cpu, n = _cpu_of(child.pid), time.process_time(), 0
            while n < rollouts:
                sent = []
                for j in range(width):
                    ask = sandboxes._ask(  # type: ignore[union-attr]
                        tasks[(n + j) % len(tasks)],
                        capability,
                        seed=n + j,
                        split="val",
                        timeout_s=30.0,
                        inline=True,
                    )
                    sent.append(sandbox._request(ask))
                os.writev(child.stdin.fileno(), [b for _, r, _ in sent for b in (HEADER.pack(len(r)), r)])
                for request_id, _, _ in sent:
                    payload = sandbox.reader.read(time.monotonic() + 30.0)
                    assert (
                        payload is not None and decode_answer(payload, sandboxes.values, 0.0)[0] == request_id
                    )
                n += width
            here, there = (time.process_time() - cpu) / n, (_cpu_of(child.pid) - child_before) / n
            old = best.get(width, (here, there))
            best[width] = (min(old[0], here), min(old[1], there))
    runner.close()
    print(f"  round trip alone, {rollouts} rollouts, K requests per write (sessions send up to 8 ahead):")
    for width, (here, there) in best.items():
        print(f"    K={width}: {here * 1e6:.1f} µs CPU here + {there * 1e6:.1f} µs in the child per rollout")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--isolation", action="store_true", help="run only section 3")
    parser.add_argument("--confinement", action="store_true", help="run only section 4")
    parser.add_argument("--repeats", type=int, default=5, help="paired repeats of section 3 (default 5)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-bench-"))
    if args.confinement:
        json.dump(confinement_sessions(tmp, 500, 4, args.repeats), sys.stdout)
        print()
        return
    if args.isolation:
        figures = isolation_sessions(tmp, 500, 4, args.repeats)
        isolation_round_trip(make_project(tmp / "round_trip", 1), 2000, args.repeats)
        batched_round_trip(make_project(tmp / "batched", 1), 4000, args.repeats)
        json.dump(figures, sys.stdout)
        print()
        return
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
        # outside the project: files left in it would be walked by the session's harness lock
        bare_before = bare_loop(project, tasks, trials, out=str(tmp / f"bare_before{r}"))
        fixed_before = startup(make_project(tmp / f"noop{r}_startup_before", trials))
        total = plugin_run(project)
        fixed_after = startup(make_project(tmp / f"noop{r}_startup_after", trials))
        bare_after = bare_loop(project, tasks, trials, out=str(tmp / f"bare_after{r}"))
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

    figures = isolation_sessions(tmp, tasks, trials, args.repeats)
    isolation_round_trip(make_project(tmp / "round_trip", 1), n, args.repeats)
    json.dump(
        {
            "per_rollout_ratio": per_plugin / per_bare,
            "xdist_ratio": wall / ideal,
            **figures,
        },
        sys.stdout,
    )
    print()


if __name__ == "__main__":
    main()
