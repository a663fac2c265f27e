"""What installing the plugin costs a pytest run that never asks for it.

Wall time of a one-test pytest session of an unrelated suite, with the plugin installed
(auto-loaded from its entry point) against the same session with ``-p no:capevolve``,
alternated in one run so load on this shared machine hits both alike. Prints the medians
of wall and of CPU time (user + system, from the child's rusage: much less moved by the load
of other processes) and their ratios (goal: ≤ 1.05), and which heavy modules a plain session
imported.

``--sessions``: instead, the fixed CPU a capevolve session or command pays, on a copy of
``examples/noisy_agent`` cut to 2 val tasks × 2 trials (user + system of the process and its
children, median of the rounds): a fresh evaluation, a resume and a gate session with nothing
owed, ``capevolve measure``, ``verify`` and ``check``, each beside a trivial pytest session; and
fresh evaluations run in one process, as the suite's pytester sessions run (what one costs after
the first). With ``--baseline REV`` each is measured alternately against the package of REV (a
temporary worktree put first on ``PYTHONPATH``), and the ratio now / baseline printed. Both
read our bytecode from one fresh cache (``PYTHONPYCACHEPREFIX``), as on a user's machine.
``--gold N`` puts N files of evaluation data under the project's ``data/``: what the harness
lock hashes and every sandbox child hides, at each session's start.

    python benchmarks/startup.py [--rounds N] [--sessions [--baseline REV] [--gold N]]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

HEAVY = ("numpy", "scipy", "yaml", "git", "pytest_capevolve._session", "pytest_capevolve._store")
PROBE = """
import sys
def pytest_unconfigure(config):
    heavy = [m for m in {heavy!r} if m in sys.modules]
    print("HEAVY=" + ",".join(heavy))
"""


def bytecode_env(cache: Path) -> dict[str, str]:
    """The environment with bytecode read from (and written to) ``cache``, as on a user's machine
    where pip compiled it: with ``PYTHONDONTWRITEBYTECODE`` and no cache, every session would
    compile pytest afresh (~1 s of CPU), hiding what the plugin costs."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def session_wall(folder: Path, *extra: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, the heavy modules it imported) of one session, reading its
    bytecode from ``pycache`` beside ``folder`` (the first session writes it; not beneath the
    folder, which pytest walks)."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *extra],
        cwd=folder,
        env=bytecode_env(folder.parent / "pycache"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the probe session failed:\n{out}")
    heavy = next((line[6:] for line in out.splitlines() if line.startswith("HEAVY=")), "?")
    return wall, usage.ru_utime + usage.ru_stime, heavy


def small_project(folder: Path, gold: int = 0) -> Path:
    """``examples/noisy_agent`` with 4 tasks (2 in val) and 2 trials; its one microcase that
    names a task beyond those dropped; ``gold`` files of evaluation data under ``data/`` (held
    by the harness lock, hidden from candidate code)."""
    project = folder / "noisy_agent"
    shutil.copytree(REPO / "examples" / "noisy_agent", project, ignore=shutil.ignore_patterns(".capevolve"))
    for name, old, new in (
        ("adapter.py", "N_TASKS = 80\n", "N_TASKS = 4\n"),
        ("capevolve.yaml", "num_trials: 5\n", "num_trials: 2\n"),
    ):
        text = (project / name).read_text()
        if old not in text:
            raise SystemExit(
                f"examples/noisy_agent/{name} no longer holds {old.strip()!r}: update small_project"
            )
        (project / name).write_text(text.replace(old, new))
    microcases = project / "microcases" / "scorer-and-agent.yaml"
    kept = [case for case in microcases.read_text().split("\n- id: ") if "task: n63" not in case]
    microcases.write_text("\n- id: ".join(kept))
    for i in range(gold):
        (project / "data" / f"part{i // 1000}").mkdir(parents=True, exist_ok=True)
        (project / "data" / f"part{i // 1000}" / f"case{i}.json").write_text(f'{{"answer": {i}}}\n')
    return project


IN_PROCESS = """
import contextlib, io, os, resource, sys
import pytest
os.chdir(sys.argv[1])
def cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
argv = ["-q", "-p", "no:cacheprovider", "--capevolve-run", ".", "--capevolve-new-run"]
with contextlib.redirect_stdout(io.StringIO()):
    pytest.main(argv)  # the first pays the imports, once per process
    start = cpu()
    for _ in range(int(sys.argv[2])):
        pytest.main(argv)
print(f"CPU={(cpu() - start) / int(sys.argv[2])}")
"""


def cpu_of(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """CPU seconds (user + system) of one command and every child it waited for."""
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    out = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1, 10):
        raise SystemExit(f"{' '.join(argv)} failed:\n{out}")
    if "CPU=" in out:
        return float(out.rpartition("CPU=")[2].split()[0])
    return usage.ru_utime + usage.ru_stime


def sessions(rounds: int, baseline: str | None, gold: int) -> None:
    """The fixed CPU of capevolve's sessions and commands (see the module's docstring)."""
    python, cli = sys.executable, str(Path(sys.executable).parent / "capevolve")
    pytest_run = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trivial = folder / "trivial"
        trivial.mkdir()
        (trivial / "test_one.py").write_text("def test_one():\n    pass\n")
        builds = {"now": REPO}
        if baseline:
            builds["baseline"] = folder / "baseline"
            subprocess.run(
                ["git", "worktree", "add", "-q", "--detach", str(builds["baseline"]), baseline],
                cwd=REPO,
                check=True,
            )
        try:
            envs, projects = {}, {}
            for name, tree in builds.items():
                env = bytecode_env(folder / f"pycache-{name}")
                if name != "now":
                    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
                envs[name] = env
                projects[name] = small_project(folder / name, gold)
                fresh = small_project(folder / f"{name}-fresh", gold)
                projects[f"{name}-fresh"] = fresh
                for argv in (  # the run the resumes read, and a warm bytecode cache
                    [*pytest_run, "--capevolve-run", "."],
                    [
                        *pytest_run,
                        "--capevolve-run",
                        ".",
                        "--capevolve-candidate",
                        "candidates/improved",
                        "--capevolve-gate",
                    ],
                ):
                    cpu_of(argv, projects[name], env)
            (folder / "in_process.py").write_text(IN_PROCESS)
            cases: dict[str, tuple[list[str], str]] = {
                "trivial pytest session": ([*pytest_run], "trivial"),
                "fresh evaluation, 4 rollouts": (
                    [*pytest_run, "--capevolve-run", ".", "--capevolve-new-run"],
                    "fresh",
                ),
                "resume, nothing owed": ([*pytest_run, "--capevolve-run", "."], ""),
                "gate session, nothing owed": (
                    [
                        *pytest_run,
                        "--capevolve-run",
                        ".",
                        "--capevolve-candidate",
                        "candidates/improved",
                        "--capevolve-gate",
                    ],
                    "",
                ),
                "capevolve --help": ([cli, "--help"], ""),
                "capevolve measure": ([cli, "measure", "--no-finalize"], ""),
                "capevolve verify": ([cli, "verify"], ""),
                "capevolve check": ([cli, "check"], ""),
                "fresh evaluation in-process (each after the first)": (
                    [python, str(folder / "in_process.py"), ".", "3"],
                    "fresh",
                ),
            }
            cpu: dict[tuple[str, str], list[float]] = {}
            for _ in range(rounds):
                for case, (argv, where) in cases.items():
                    for name in builds:  # alternated, so a change of load hits both alike
                        cwd = trivial if where == "trivial" else projects[f"{name}-fresh" if where else name]
                        cpu.setdefault((case, name), []).append(cpu_of(argv, cwd, envs[name]))
        finally:
            if baseline:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(builds["baseline"])], cwd=REPO, check=False
                )
    trivial_now = statistics.median(cpu["trivial pytest session", "now"])
    print(
        f"CPU s (user + system, with children), median of {rounds} alternated rounds; 2 val tasks x 2 trials"
        + (f", {gold} files under data/" if gold else "")
    )
    head = f"{'now':>7} {'/trivial':>8}" + (f" {'baseline':>9} {'now/base':>8}" if baseline else "")
    print(f"{head}  case")
    for case in cases:
        now = statistics.median(cpu[case, "now"])
        line = f"{now:7.3f} {now / trivial_now:7.2f}x"
        if baseline:
            base = statistics.median(cpu[case, "baseline"])
            line += f" {base:9.3f} {now / base:7.2f}x"
        print(f"{line}  {case}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sessions", action="store_true", help="the fixed CPU of capevolve's sessions")
    parser.add_argument("--baseline", metavar="REV", help="with --sessions: against the package of REV")
    parser.add_argument(
        "--gold", type=int, default=0, metavar="N", help="with --sessions: N data files in the project"
    )
    args = parser.parse_args()
    if args.sessions:
        sessions(args.rounds, args.baseline, args.gold)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "suite"
        folder.mkdir()
        (folder / "test_unrelated.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        (folder / "conftest.py").write_text(PROBE.format(heavy=HEAVY))
        with_plugin: list[tuple[float, float]] = []
        without: list[tuple[float, float]] = []
        heavy_seen = ""
        session_wall(folder)  # warm the file system cache and write the bytecode of both
        session_wall(folder, "-p", "no:capevolve")
        for _ in range(args.rounds):
            wall, cpu, heavy_seen = session_wall(folder)
            with_plugin.append((wall, cpu))
            without.append(session_wall(folder, "-p", "no:capevolve")[:2])
    print(f"one-test pytest session, median of {args.rounds} alternated runs")
    for at, name in ((0, "wall"), (1, "CPU ")):
        installed = statistics.median(r[at] for r in with_plugin)
        disabled = statistics.median(r[at] for r in without)
        # the spread: quartiles of the ratio of each alternated pair
        pairs = [w[at] / o[at] for w, o in zip(with_plugin, without, strict=True)]
        low, _, high = statistics.quantiles(pairs, n=4) if len(pairs) > 1 else (pairs[0],) * 3
        print(
            f"  {name}: plugin installed {installed:.3f} s, -p no:capevolve {disabled:.3f} s: "
            f"{installed / disabled:.3f}x  (goal ≤ 1.05; pairs' quartiles {low:.3f}–{high:.3f}x)"
        )
    print(f"  heavy modules imported by the plain session: {heavy_seen or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
