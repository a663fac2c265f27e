"""The run dir at scale: 10,000 tasks × 3 trials × 2 tags (60,000 rollouts) of a no-op agent.

Run: python benchmarks/scale.py [--tasks N] [--graded] [--project DIR] [--rounds N] [--cached]
(default 10000; figures are ratios against baselines measured in the same run, because these
machines are shared and noisy; ``--graded``: rewards in tenths from a seeded hash of task, trial
and candidate, as a graded scorer gives, rather than all 1.0; ``--project`` reuses a project an
earlier run of this script made, with the same ``--tasks``, and prints only 4b, 6 and 7;
``--waits-only`` with it: only 4b; ``--rounds``: the interleaved pairs of 4b, default 3;
``--cached``: 4b with Python's bytecode cache; ``--profile-resume N`` with ``--project``: only
where the CPU of N resumes goes, see 8)

1. Fresh run: wall per rollout of `pytest --capevolve-run` (whole process), against a bare loop
   calling the adapter and writing the same records atomically.
2. Peak memory per item: the fresh run's peak RSS less the resume's (same process, no items),
   over the rollouts (goal ≤ 2 KB); and the fresh run's peak RSS against its RSS when the run
   loop ended (goal ≤ 1.25×: the summary, report.md and dashboard built after the loop must
   not hold a second copy of the run), read by a probe plugin (``-p``) outside the project.
3. Resume with everything persisted: the same command again (goal ≤ 1.5 s), beside a bare
   `pytest` session on one trivial test (the interpreter + pytest's own start-up).
4. `capevolve gate cand` and `capevolve measure --no-finalize` (goal ≤ 1 s each), beside
   `capevolve --help` (the interpreter + the CLI's start-up).
4b. The waits around a decision (issue 40), wall and CPU, each the better of ``--rounds``
   interleaved pairs (and the median and range of the pairs' CPU ratios): the resume of 3 (goal
   ≤ 1.5x a trivial pytest session), `capevolve dashboard` (goal ≤ 1.5x a `cat` of every file of
   the run) and `capevolve measure` (beside `--help`).
5. When PYTHONDONTWRITEBYTECODE is set (as on these machines), 3 and 4 once more with Python's
   default bytecode cache, as a user's machine runs them.
6. `capevolve verify` (goal ≤ 1.5×) against a script that reads and parses every rollout file once.
7. `capevolve gate cand` (goal ≤ 1.1×) against a naive script: read every rollout file, per-task
   means with numpy, their mean delta.
   6 and 7 print two ratios: of wall time, and of CPU time (user + system, from the child's
   rusage: what the work costs, much less moved by the load of other processes than the wall),
   each the better of three interleaved pairs; and the same again with Python's bytecode cache
   for our modules, as on a user's machine (the baseline scripts import only the standard
   library, whose cache is always there).
8. ``--project DIR --profile-resume N``: where a resume with nothing owed spends its CPU, sampled
   (``SIGPROF`` every millisecond of the process's CPU, the main thread's stack; no profiler's
   per-call cost, which inflates Python loops several-fold against C calls), over N resumes with
   our bytecode cached: each sample charged to the innermost frame of our package (or to the
   import of numpy, of our package, of anything else), the shares printed against the resume's
   CPU from its rusage.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from overhead import bare_loop, make_project  # noqa: E402

TRIALS = 3


GRADED_ADAPTER = """
import hashlib, os
from pytest_capevolve import Rollout, Score, Task

_PROMPTS = {}

class Adapter:
    # graded rewards: tenths from a seeded hash of (task, trial seed, the candidate's prompt)
    def tasks(self, split):
        return [Task(id=f"t{i:04d}", input=i, target=i) for i in range(int(os.environ["BENCH_TASKS"]))]
    def run_target(self, task, ctx, *, seed):
        prompt = _PROMPTS.get(str(ctx))
        if prompt is None:
            with open(os.path.join(str(ctx), "prompt.md")) as handle:
                prompt = _PROMPTS[str(ctx)] = handle.read()
        digest = hashlib.blake2b(f"{task.id}|{seed}|{prompt}".encode(), digest_size=2).digest()
        return Rollout(task_id=task.id, output=int.from_bytes(digest, "big") % 11)
    def score(self, task, rollout):
        return Score(reward=rollout.output / 10)
"""

RSS_PROBE = """
import os, pytest

@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtestloop(session):
    # innermost wrapper: right after the items ran, before any summary, report or dashboard
    result = yield
    with open("/proc/self/statm") as statm:
        resident = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    with open(os.environ["CAPEVOLVE_RSS_PROBE"], "w") as out:
        out.write(str(resident))
    return result
"""


def timed(
    command: list[str], cwd: Path, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None
) -> tuple[float, int]:
    """(wall seconds, peak RSS in KB) of one subprocess; ``ok``: the exit codes expected."""
    wall, _, rss = timed_cpu(command, cwd, ok, env)
    return wall, rss


def timed_cpu(
    command: list[str], cwd: Path, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None
) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds: user + system, peak RSS in KB) of one subprocess."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in ok:
        raise SystemExit(f"{' '.join(command)} failed: {process.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", type=int, default=10_000, help="tasks (× 3 trials × 2 tags; default 10,000)"
    )
    parser.add_argument(
        "--project",
        type=Path,
        default=None,
        help="the project an earlier run printed: only verify and gate again",
    )
    parser.add_argument("--graded", action="store_true", help="graded rewards (tenths) instead of all 1.0")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="interleaved pairs per wait of 4b (default 3; issue 40's resume figure is quoted at 12)",
    )
    parser.add_argument("--waits-only", action="store_true", help="with --project: print only 4b")
    parser.add_argument(
        "--cached", action="store_true", help="4b with Python's bytecode cache (as on a user's machine)"
    )
    parser.add_argument(
        "--profile-resume",
        type=int,
        default=0,
        metavar="N",
        help="with --project: only sample N resumes' CPU (our bytecode cached) and print where it goes",
    )
    args = parser.parse_args()
    os.environ.update(BENCH_TASKS=str(args.tasks), BENCH_SLEEP="0")
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if args.project is not None:
        project = args.project.resolve()
        cli = [str(Path(sys.executable).parent / "capevolve")]
        run_cmd = [
            *pytest_cmd,
            "--capevolve-run",
            str(project),
            "--capevolve-candidate",
            str(project / "cand"),
        ]
        if args.profile_resume:
            profile_resume(project, run_cmd, args.profile_resume)
            return
        waits(project, run_cmd, pytest_cmd, cli, args.rounds, cached=args.cached)
        if args.waits_only:
            return
        reads(project, cli)
        stale_bytecode_note()
        return
    tasks = args.tasks
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-scale-"))
    project = make_project(tmp / "scale", TRIALS)
    if args.graded:
        (project / "adapter.py").write_text(GRADED_ADAPTER)
    # kept for --project (verify and gate again without paying the run); it is yours to delete
    print(f"project: {project}  (rerun verify and gate: --project {project}; delete {tmp} when done)")
    probe = tmp / "probe"
    probe.mkdir()
    (probe / "capevolve_rss_probe.py").write_text(RSS_PROBE)
    (project / "cand").mkdir()
    (project / "cand" / "prompt.md").write_text("hello again\n")
    rollouts = tasks * TRIALS * 2
    run_cmd = [*pytest_cmd, "--capevolve-run", str(project), "--capevolve-candidate", str(project / "cand")]
    cli = [str(Path(sys.executable).parent / "capevolve")]

    # its records outside the project: 30,000 files left in it were walked by every session's
    # harness lock, ~0.2 s of CPU no user's project pays
    bare = 2 * bare_loop(project, tasks, TRIALS, out=str(tmp / "bare"))  # two tags' worth
    probe_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(probe), os.environ.get("PYTHONPATH")])),
        "CAPEVOLVE_RSS_PROBE": str(probe / "rss_at_loop_end"),
    }
    fresh, fresh_rss = timed([*run_cmd, "-p", "capevolve_rss_probe"], project, env=probe_env)
    loop_end_rss = int((probe / "rss_at_loop_end").read_text())
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
        f"  fresh run's peak RSS:     {fresh_rss / loop_end_rss:8.2f}x its RSS when the run loop ended "
        f"({fresh_rss / 1024:.0f} MB against {loop_end_rss / 1024:.0f} MB)"
    )
    print(
        f"  resume, all persisted:    {resume:8.2f} s   ({resume / bare_pytest:.1f}x a bare pytest "
        f"session's {bare_pytest:.2f}s)"
    )
    print(
        f"  capevolve gate:           {gate:8.2f} s   ({gate / cli_start:.1f}x capevolve --help {cli_start:.2f}s)"
    )
    print(f"  capevolve measure:        {measure:8.2f} s   ({measure / cli_start:.1f}x capevolve --help)")
    waits(project, run_cmd, pytest_cmd, cli, args.rounds, cached=args.cached)
    reads(project, cli)
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        stale_bytecode_note()
        cached_start_up(project, run_cmd, [*pytest_cmd, str(trivial)], cli)


def stale_bytecode_note() -> None:
    """Say so when the figures meant to be uncached read part of our bytecode: a process run
    without PYTHONDONTWRITEBYTECODE (a test run, say) left __pycache__ in the package. The
    ``--project`` runs say it too: they print the uncached verify and gate lines."""
    package = Path(__file__).resolve().parent.parent / "pytest_capevolve"
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and any(package.rglob("__pycache__")):
        print(
            f"  (note: {package} holds __pycache__ from an earlier run with the default cache, so the"
            " figures above read part of our bytecode from it; delete it for uncached figures)"
        )


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


def waits(
    project: Path,
    run_cmd: list[str],
    pytest_cmd: list[str],
    cli: list[str],
    rounds: int = 3,
    *,
    cached: bool = False,
) -> None:
    """Issue 40's waits around a decision, each against its baseline, interleaved (each pair back
    to back, ``rounds`` times; the better of each kept, wall and CPU apart, and the spread of the
    pairs' CPU ratios: their median, lowest and highest): a resume with nothing owed against a
    pytest session of one trivial test (goal ≤ 1.5x), ``capevolve dashboard`` against a ``cat``
    of every file of the run (goal ≤ 1.5x), ``capevolve measure`` against ``capevolve --help``.
    ``cached``: every process with Python's bytecode cache (a folder of its own, filled by a first
    run of each command), as on a user's machine; else as this environment says (where
    PYTHONDONTWRITEBYTECODE is set, pytest rewrites every module of its plugins' packages again in
    each process, hypothesis's too: ~0.9 s of a trivial session's CPU here)."""
    env = None
    if cached:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(project.parent / "bytecode")
    trivial = project.parent / "trivial"
    trivial.mkdir(exist_ok=True)
    (trivial / "test_one.py").write_text("def test_one():\n    pass\n")
    run = next((project / ".capevolve" / "runs").iterdir())
    pairs = {
        "resume, nothing owed": (
            (run_cmd, (0,)),
            ([*pytest_cmd, str(trivial)], (0,)),
            "a trivial pytest session",
        ),
        "capevolve dashboard": (
            ([*cli, "dashboard", str(project)], (0,)),
            (["sh", "-c", f"find '{run}' -type f -exec cat {{}} + >/dev/null"], (0,)),
            "a cat of every file of the run",
        ),
        "capevolve measure": (
            ([*cli, "measure", str(project), "--no-finalize"], (0,)),
            ([*cli, "--help"], (0,)),
            "capevolve --help",
        ),
    }
    label = ", bytecode cached" if cached else ""
    print(f"  the waits around a decision (better of {rounds} interleaved pairs{label}):")
    for name, ((ours, ok), (base, base_ok), said) in pairs.items():
        mine, theirs = [], []
        if cached:  # fills the cache
            timed_cpu(ours, project, ok, env)
            timed_cpu(base, project, base_ok, env)
        for _ in range(rounds):
            mine.append(timed_cpu(ours, project, ok, env)[:2])
            theirs.append(timed_cpu(base, project, base_ok, env)[:2])
        wall, cpu = min(w for w, _ in mine), min(c for _, c in mine)
        base_wall, base_cpu = min(w for w, _ in theirs), min(c for _, c in theirs)
        ratios = sorted(c / b for (_, c), (_, b) in zip(mine, theirs, strict=True))
        print(
            f"  {name + ':':<26}{wall:6.2f} s wall, {cpu:.2f} s CPU: {wall / base_wall:.2f}x wall, "
            f"{cpu / base_cpu:.2f}x CPU of {said} ({base_wall:.2f} s, {base_cpu:.2f} s CPU); "
            f"CPU ratio of a pair: median {statistics.median(ratios):.2f}x, {ratios[0]:.2f}-{ratios[-1]:.2f}x"
        )


def reads(project: Path, cli: list[str]) -> None:
    """6 and 7: the commands that read the whole run, against one naive read of it, interleaved
    (each pair back to back, three times; the better of each is kept) so the machine's load hits
    both; then once more with our modules' bytecode cached."""
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = str(project.parent / "bytecode")
    timed([*cli, "verify", str(project)], project, env=cached)  # fills the cache
    for env, label in ((None, ""), (cached, " (our bytecode cached)")):
        walls: dict[str, list[tuple[float, float]]] = {n: [] for n in ("verify", "read", "gate", "naive")}
        for _ in range(3):
            walls["read"].append(timed_cpu([sys.executable, "-c", READ_ONCE, str(project)], project)[:2])
            walls["verify"].append(timed_cpu([*cli, "verify", str(project)], project, env=env)[:2])
            walls["naive"].append(timed_cpu([sys.executable, "-c", NAIVE_GATE, str(project)], project)[:2])
            gate = [*cli, "gate", "cand", "--project", str(project)]
            walls["gate"].append(timed_cpu(gate, project, ok=(0, 10), env=env)[:2])
        wall = {name: min(w for w, _ in values) for name, values in walls.items()}
        cpu = {name: min(c for _, c in values) for name, values in walls.items()}
        print(
            f"  capevolve verify{label}: {wall['verify']:6.2f} s wall, {cpu['verify']:.2f} s CPU: "
            f"{wall['verify'] / wall['read']:.2f}x wall, {cpu['verify'] / cpu['read']:.2f}x CPU of one read and "
            f"parse of every rollout file ({wall['read']:.2f} s, {cpu['read']:.2f} s CPU)"
        )
        print(
            f"  capevolve gate{label}:   {wall['gate']:6.2f} s wall, {cpu['gate']:.2f} s CPU: "
            f"{wall['gate'] / wall['naive']:.2f}x wall, {cpu['gate'] / cpu['naive']:.2f}x CPU of a naive "
            f"read-every-file-and-numpy script ({wall['naive']:.2f} s, {cpu['naive']:.2f} s CPU)"
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


SAMPLER = """
import collections, json, os, runpy, signal, sys

samples = collections.Counter()
PACKAGE = os.sep + "pytest_capevolve" + os.sep


def charged(frame):
    imports = []
    ours = None
    while frame is not None:
        name = frame.f_code.co_filename
        if ours is None and PACKAGE in name:
            ours = name.rsplit(PACKAGE, 1)[1] + ":" + frame.f_code.co_name
        if frame.f_code.co_name == "_find_and_load":
            imports.append(str(frame.f_locals.get("name", "?")))
        frame = frame.f_back
    if not imports:
        return ours or "outside our package (pytest, the interpreter)"
    if imports[0].split(".")[0] == "numpy":
        return "import numpy"
    if any(name.startswith("pytest_capevolve") for name in imports):
        return "import our package and what it pulls in (numpy apart)"
    return "import anything else (pytest, its plugins)"


def on_tick(signum, frame):
    samples[charged(frame)] += 1


out = sys.argv[1]
sys.argv = sys.argv[3:]
signal.signal(signal.SIGPROF, on_tick)
signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
finally:
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    with open(out, "w") as handle:
        json.dump(samples, handle)
"""


def profile_resume(project: Path, run_cmd: list[str], runs: int) -> None:
    """8: where a resume's CPU goes, sampled over ``runs`` resumes (see the module's docstring)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(project.parent / "bytecode")
    timed(run_cmd, project, env=env)  # fills the cache
    out = project.parent / "resume_samples.json"
    samples: dict[str, int] = {}
    cpu = []
    for _ in range(runs):
        sampled = [sys.executable, "-c", SAMPLER, str(out), "-m", *run_cmd[2:]]
        cpu.append(timed_cpu(sampled, project, env=env)[1])
        for where, count in json.loads(out.read_text()).items():
            samples[where] = samples.get(where, 0) + count
    total = sum(samples.values())
    median = statistics.median(cpu)
    print(f"  resume, nothing owed: {median:.2f} s CPU (median of {runs}), {total} samples; where it goes:")
    for where, count in sorted(samples.items(), key=lambda item: -item[1])[:25]:
        print(f"  {count / total:6.1%} {median * count / total:6.3f} s  {where}")


if __name__ == "__main__":
    main()
