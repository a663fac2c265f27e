"""What installing the plugin costs a pytest run that never asks for it.

Wall time of a one-test pytest session of an unrelated suite, with the plugin installed
(auto-loaded from its entry point) against the same session with ``-p no:capevolve``,
alternated in one run so load on this shared machine hits both alike. Prints the medians
of wall and of CPU time (user + system, from the child's rusage: much less moved by the load
of other processes) and their ratios (goal: ≤ 1.05), and which heavy modules a plain session
imported.

    python benchmarks/startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("numpy", "scipy", "yaml", "git", "pytest_capevolve._session", "pytest_capevolve._store")
PROBE = """
import sys
def pytest_unconfigure(config):
    heavy = [m for m in {heavy!r} if m in sys.modules]
    print("HEAVY=" + ",".join(heavy))
"""


def session_wall(folder: Path, *extra: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, the heavy modules it imported) of one session."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *extra],
        cwd=folder,
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_unrelated.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        (folder / "conftest.py").write_text(PROBE.format(heavy=HEAVY))
        with_plugin: list[tuple[float, float]] = []
        without: list[tuple[float, float]] = []
        heavy_seen = ""
        session_wall(folder)  # warm the file system cache for both
        for _ in range(args.rounds):
            wall, cpu, heavy_seen = session_wall(folder)
            with_plugin.append((wall, cpu))
            without.append(session_wall(folder, "-p", "no:capevolve")[:2])
    print(f"one-test pytest session, median of {args.rounds} alternated runs")
    for at, name in ((0, "wall"), (1, "CPU ")):
        installed = statistics.median(r[at] for r in with_plugin)
        disabled = statistics.median(r[at] for r in without)
        print(
            f"  {name}: plugin installed {installed:.3f} s, -p no:capevolve {disabled:.3f} s: "
            f"{installed / disabled:.3f}x  (goal ≤ 1.05)"
        )
    print(f"  heavy modules imported by the plain session: {heavy_seen or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
