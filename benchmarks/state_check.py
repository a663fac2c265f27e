"""What checking ``state.json`` against the log costs a process's first read of the state.

A log of N rollout events (default 60,000) is written once and left as a session leaves it (its
``outcomes_checked`` checkpoint carrying the state's tally); then, each in a fresh RunDir (a
fresh process's view), the best of three of: one full ``log.events()`` read (the baseline: what
``verify`` and ``measure`` already pay); the first ``state.read_state()``, which folds the log
from the checkpoint on to check the file (later reads fold only what was appended); and the
same with the checkpoint hidden (a crash left none: the whole log is folded). Printed as ratios.

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
            reward=1.0, infra_error=None, cost_usd=0.001, sha256="x" * 64,
        )  # fmt: skip
    run.rollouts.ledger.current(run.rollouts.index.every)  # the ledger a session builds, then leaves
    run.flush()
    baseline = _best(lambda: RunDir(root).log.events())
    checked = _best(lambda: RunDir(root).state.read_state())
    whole = _best(lambda: _without_checkpoint(RunDir(root)).state.read_state())
    print(
        f"{count} events: first checked read_state {checked * 1000:.0f} ms = {checked / baseline:.3f}x "
        f"one full log.events() read ({baseline * 1000:.0f} ms); "
        f"with no checkpoint {whole * 1000:.0f} ms = {whole / baseline:.2f}x"
    )


def _without_checkpoint(run: RunDir) -> RunDir:
    of_kinds = run.log.of_kinds
    run.log.of_kinds = lambda *kinds: [] if "outcomes_checked" in kinds else of_kinds(*kinds)  # type: ignore[method-assign]
    return run


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60_000)
