"""What the tests cost in CPU time, against a baseline revision of the tests, in one run.

On a shared machine the wall time of a test mostly measures the other processes; its CPU time
(user + system of the test process and of every child it waited for: pytester subprocesses,
inner xdist workers, sandbox children, CLI calls) hardly moves with the load. Runs the given
test files one at a time, in this checkout and in a temporary worktree of ``--baseline``
(default ``main``), alternated, and prints each test's CPU seconds in both and the ratio of the
totals. Only the tests differ between the two: both import the installed package.

    python benchmarks/suite_cpu.py [--baseline REV] [-k EXPR] FILE...
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = """
import os, resource
import pytest

def _cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _cpu()
    yield
    with open(os.environ["SUITE_CPU_OUT"], "a") as out:
        out.write(f"{_cpu() - before:.3f}\\t{item.nodeid}\\n")
"""


def measure(tree: Path, file: str, select: str | None, scratch: Path) -> dict[str, float]:
    """Each test's CPU seconds when ``file`` runs in ``tree``."""
    out = scratch / "cpu.tsv"
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(scratch), "SUITE_CPU_OUT": str(out)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "suite_cpu_probe", file]
    subprocess.run([*argv, *(["-k", select] if select else [])], cwd=tree, env=env, check=False)
    rows = [line.split("\t") for line in out.read_text().splitlines()] if out.exists() else []
    return {node: float(cpu) for cpu, node in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--baseline", default="main")
    parser.add_argument("-k", dest="select")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        (scratch / "suite_cpu_probe.py").write_text(PROBE)
        base = scratch / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(base), args.baseline], cwd=REPO, check=True
        )
        before: dict[str, float] = {}
        after: dict[str, float] = {}
        try:
            for file in args.files:  # alternated, so that a change of load hits both alike
                before |= measure(base, file, args.select, scratch)
                after |= measure(REPO, file, args.select, scratch)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, check=False)
    print(f"{'baseline':>9} {'now':>7}  test")
    for node in sorted(before.keys() | after.keys()):
        old, new = before.get(node), after.get(node)
        print(f"{'-' if old is None else f'{old:.2f}':>9} {'-' if new is None else f'{new:.2f}':>7}  {node}")
    total_before, total_after = sum(before.values()), sum(after.values())
    ratio = total_after / total_before if total_before else float("nan")
    print(f"{total_before:9.2f} {total_after:7.2f}  total CPU s (now / baseline = {ratio:.2f})")


if __name__ == "__main__":
    main()
