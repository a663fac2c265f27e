"""What checking a decision's views against the log costs (issue 24): the events a decision reads
(the best's, the seal's, a verdict's) found by their bytes in a 60,000-rollout log, against
decoding the whole log, the baseline measured in the same run.

    python benchmarks/verified_reads.py [--rollouts N]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

from pytest_capevolve._store.events import EventLog


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    log = EventLog(folder / "events.jsonl", contextlib.nullcontext)
    log.append_event("run_created", spec="capevolve.yaml", run_id="bench")
    for i in range(args.rollouts):
        log.append_event(
            "rollout",
            split="val",
            task_id=f"t{i % 10000}",
            tag="seed",
            trial=i // 10000,
            reward=1.0,
            cost_usd=0.001,
            passed=True,
        )
    log.append_event("decision", tag="c", decision="reject")
    start = time.perf_counter()
    for _ in range(args.repeats):
        log._kinds_cache.clear()  # every call pays the scan, as a session's first read does
        log.of_kinds("decision", "best_changed")
        log.of_kinds("test_scored")
    checked = (time.perf_counter() - start) / args.repeats
    start = time.perf_counter()
    log.events()
    decoded = time.perf_counter() - start
    size = (folder / "events.jsonl").stat().st_size / 1e6
    print(f"log of {args.rollouts:,} rollouts ({size:.1f} MB)")
    print(f"  a session's checked reads (best + seal): {checked * 1e3:.1f} ms")
    print(f"  decoding the whole log once:             {decoded * 1e3:.0f} ms")
    print(f"  ratio                                    {checked / decoded:.3f}")


if __name__ == "__main__":
    main()
