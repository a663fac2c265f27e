"""What the tests cost in CPU time, against a baseline revision of the tests, in one run.

On a shared machine the wall time of a test mostly measures the other processes; its CPU time
(user + system of the test process and of every child it waited for: pytester subprocesses,
inner xdist workers, sandbox children, CLI calls) hardly moves with the load. Runs the given
test files one at a time, in this checkout and in a temporary worktree of ``--baseline``
(default ``main``), alternated, and prints each test's CPU seconds in both and the ratio of the
totals. Only the tests differ between the two: both import the installed package. A machine under
load moves a test's CPU time too (by a tenth or more: caches, frequency), so ``--rounds N`` runs
each file N times on both sides, still alternated, and prints each test's median.

``--where [PATH...]`` measures this checkout alone (default: the whole suite, as the README's
command runs it, over ``-n 2`` workers): each file's CPU seconds and its tests, the most
expensive first, then the most expensive tests and the total, and when each worker ran its last
test (an idle core at the end shows there); where to look before changing a test. The workers'
start-up and collection are in no test's figure.

    python benchmarks/suite_cpu.py [--baseline REV] [--rounds N] [-k EXPR] FILE...
    python benchmarks/suite_cpu.py --where [-n N] [--top K] [PATH...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = """
import os, resource, time
import pytest

def _cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _cpu()
    yield
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.environ["SUITE_CPU_OUT"], "a") as out:
        out.write(f"{_cpu() - before:.3f}\\t{item.nodeid}\\t{worker}\\t{time.time():.3f}\\n")
"""


def measure(tree: Path, paths: list[str], select: str | None, scratch: Path, *extra: str) -> dict[str, float]:
    """Each test's CPU seconds when ``paths`` run in ``tree`` (``extra``: more pytest options)."""
    out = scratch / "cpu.tsv"
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(scratch), "SUITE_CPU_OUT": str(out)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "suite_cpu_probe", *extra]
    subprocess.run([*argv, *paths, *(["-k", select] if select else [])], cwd=tree, env=env, check=False)
    rows = [line.split("\t") for line in out.read_text().splitlines()] if out.exists() else []
    return {node: float(cpu) for cpu, node, *_ in rows}


def tail(scratch: Path) -> None:
    """The last measurement's idle tail: when each worker finished its last test, and how long
    the first to finish then stood idle while another still ran (wall clock: load moves it)."""
    out = scratch / "cpu.tsv"
    rows = [line.split("\t") for line in out.read_text().splitlines()] if out.exists() else []
    last: dict[str, tuple[float, str]] = {}
    for _, node, worker, end in rows:
        last[worker] = max(last.get(worker, (0.0, "")), (float(end), node))
    if len(last) < 2:
        return
    done = max(end for end, _ in last.values())
    print("\nlast test per worker (s before the last worker's end):")
    for worker, (end, node) in sorted(last.items()):
        print(f"{done - end:8.1f}  {worker}  {node}")


def where(paths: list[str], workers: str, top: int, select: str | None, scratch: Path) -> None:
    """Print where this checkout's tests spend their CPU: per file, then the dearest tests."""
    tests = measure(REPO, paths, select, scratch, *(["-n", workers] if workers != "0" else []))
    files: dict[str, list[float]] = {}
    for node, cpu in tests.items():
        files.setdefault(node.split("::")[0], []).append(cpu)
    print(f"{'CPU s':>8} {'tests':>5}  file")
    for file, cpus in sorted(files.items(), key=lambda item: -sum(item[1])):
        print(f"{sum(cpus):8.2f} {len(cpus):5d}  {file}")
    print(f"\n{'CPU s':>8}  test (the {top} dearest)")
    for node, cpu in sorted(tests.items(), key=lambda item: -item[1])[:top]:
        print(f"{cpu:8.2f}  {node}")
    print(f"\n{sum(tests.values()):8.2f}  total CPU s of {len(tests)} tests")
    tail(scratch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("-k", dest="select")
    parser.add_argument("--where", action="store_true")
    parser.add_argument("-n", dest="workers", default="2")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    if not args.where and not args.files:
        parser.error("name the test files to compare with the baseline (or --where)")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        (scratch / "suite_cpu_probe.py").write_text(PROBE)
        if args.where:
            where(args.files, args.workers, args.top, args.select, scratch)
            return
        base = scratch / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(base), args.baseline], cwd=REPO, check=True
        )
        rounds_before: dict[str, list[float]] = {}
        rounds_after: dict[str, list[float]] = {}
        try:
            for _ in range(args.rounds):
                for file in args.files:  # alternated, so that a change of load hits both alike
                    for tree, seen in ((base, rounds_before), (REPO, rounds_after)):
                        for node, cpu in measure(tree, [file], args.select, scratch).items():
                            seen.setdefault(node, []).append(cpu)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, check=False)
        before = {node: statistics.median(cpus) for node, cpus in rounds_before.items()}
        after = {node: statistics.median(cpus) for node, cpus in rounds_after.items()}
    print(f"{'baseline':>9} {'now':>7}  test")
    for node in sorted(before.keys() | after.keys()):
        old, new = before.get(node), after.get(node)
        print(f"{'-' if old is None else f'{old:.2f}':>9} {'-' if new is None else f'{new:.2f}':>7}  {node}")
    total_before, total_after = sum(before.values()), sum(after.values())
    ratio = total_after / total_before if total_before else float("nan")
    print(f"{total_before:9.2f} {total_after:7.2f}  total CPU s (now / baseline = {ratio:.2f})")


if __name__ == "__main__":
    main()
