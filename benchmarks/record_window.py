"""What bounding each xdist worker's lead over the controller costs (issue 24, attack 10).

A worker holds at most a window of rollouts the controller has not recorded, so a controller
stopped at any moment loses at most that many per worker. The price is refills that travel back
to the controller. Measured here as the wall of the same session, with the window (the default)
and with xdist's own scheduler (a ``conftest.py`` that returns it: the baseline), interleaved,
in one run:

1. no-op rollouts at ``-n 2`` (where the controller's pace matters most);
2. 20 ms rollouts at ``-n 4``.

    python benchmarks/record_window.py [--tasks N] [--repeats R]
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

sys.path.insert(0, str(Path(__file__).parent))
from overhead import make_project, session_command  # noqa: E402

XDIST_OWN = """
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScheduling
    return LoadScheduling(config, log)
"""


def session(project: Path, workers: int, baseline: bool) -> float:
    shutil.rmtree(project / ".capevolve", ignore_errors=True)
    conftest = project.parent / "conftest.py"
    conftest.write_text(XDIST_OWN if baseline else "")
    command = session_command(project)
    start = time.perf_counter()
    subprocess.run([*command, "-n", str(workers)], cwd=project.parent, check=False, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-window-"))
    for label, tasks, sleep, workers in (
        ("no-op rollouts, -n 2", args.tasks, "0", 2),
        ("20 ms rollouts, -n 4", args.tasks // 10, "0.02", 4),
    ):
        os.environ.update(BENCH_TASKS=str(tasks), BENCH_SLEEP=sleep)
        project = make_project(tmp / label.split(",")[0].replace(" ", "-") / "proj", 1)
        windowed, own = [], []
        for _ in range(args.repeats):  # interleaved: the machine's load hits both alike
            windowed.append(session(project, workers, baseline=False))
            own.append(session(project, workers, baseline=True))
        ratio = statistics.median(w / o for w, o in zip(windowed, own, strict=True))
        print(
            f"{label} ({tasks} rollouts): windowed {statistics.median(windowed):.2f} s, "
            f"xdist's own {statistics.median(own):.2f} s — ratio {ratio:.2f}"
        )


if __name__ == "__main__":
    main()
