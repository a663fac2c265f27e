"""What checking ``state.json`` against the log costs a process's first read of the state.

A log of N rollout events (default 60,000) is written once; then, each in a fresh RunDir (a
fresh process's view), the best of three of: one full ``log.events()`` read (the baseline: what
``verify`` and ``measure`` already pay), and the first ``state.read_state()``, which folds the
whole log once to check the file (later reads fold only what was appended). Printed as a ratio.

    python benchmarks/state_check.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pytest_capevolve._store.rundir import RunDir


def _best(action: Callable[[], object], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def main(count: int) -> None:
    root = Path(tempfile.mkdtemp()) / "run"
    root.mkdir(parents=True)
    run = RunDir(root)
    for i in range(count):
        run.log.append_event(
            "rollout", split="val", task_id=f"t{i % 600}", tag="seed", trial=i // 600,
            reward=1.0, infra_error=None, cost_usd=0.001, digest="x" * 64,
        )  # fmt: skip
    run.state.flush_spend()
    baseline = _best(lambda: RunDir(root).log.events())
    checked = _best(lambda: RunDir(root).state.read_state())
    print(
        f"{count} events: first checked read_state {checked * 1000:.0f} ms = {checked / baseline:.2f}x "
        f"one full log.events() read ({baseline * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60_000)
