"""What installing the plugin costs a pytest run that never asks for it.

Wall time of a one-test pytest session of an unrelated suite, with the plugin installed
(auto-loaded from its entry point) against the same session with ``-p no:capevolve``,
alternated in one run so load on this shared machine hits both alike. Prints the medians
and their ratio (goal: ≤ 1.15), and which heavy modules a plain session imported.

    python benchmarks/startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
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


def session_wall(folder: Path, *extra: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *extra],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the probe session failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    heavy = next((line[6:] for line in done.stdout.splitlines() if line.startswith("HEAVY=")), "?")
    return wall, heavy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_unrelated.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        (folder / "conftest.py").write_text(PROBE.format(heavy=HEAVY))
        with_plugin, without = [], []
        heavy_seen = ""
        session_wall(folder)  # warm the file system cache for both
        for _ in range(args.rounds):
            wall, heavy_seen = session_wall(folder)
            with_plugin.append(wall)
            without.append(session_wall(folder, "-p", "no:capevolve")[0])
    installed, disabled = statistics.median(with_plugin), statistics.median(without)
    print(f"one-test pytest session, median of {args.rounds} alternated runs")
    print(f"  plugin installed      {installed:.3f} s")
    print(f"  -p no:capevolve       {disabled:.3f} s")
    print(f"  ratio                 {installed / disabled:.3f}  (goal ≤ 1.15)")
    print(f"  heavy modules imported by the plain session: {heavy_seen or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
