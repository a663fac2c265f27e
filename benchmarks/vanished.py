"""What finding a folder of rollout files deleted by hand costs the session that finds it.

A run dir of N val rollouts, persisted as a session persists them, in two fresh folders (files
created right after thousands were deleted are slower on ext4: nothing here is re-run in place).
In one every file is deleted by hand; a new process's check of the split (what a session's
planning does) there — which logs one ``rollout_vanished`` event and one notice line — is timed
against the same check of the other, where nothing is gone (the baseline). Prints both, their
ratio, and the event's size. Paid once: the next check finds the rows gone.

    python benchmarks/vanished.py [--rollouts N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from pytest_capevolve._store.rollouts.record import RolloutRecord
from pytest_capevolve._store.rundir import RunDir


def persisted(root: Path, count: int) -> RunDir:
    rundir = RunDir(root)
    for i in range(count):
        record = RolloutRecord(
            run_id="r", split="val", task_id=f"t{i:05d}", tag="cand", trial=0, seed=0,
            candidate_hash="h", reward=1.0,
        )  # fmt: skip
        rundir.rollouts.record_rollout(record)
    rundir.flush()
    return rundir


def check(root: Path) -> tuple[float, RunDir]:
    reader = RunDir(root)  # another process: nothing of the writer's memory
    start = time.perf_counter()
    reader.rollouts.indexed_rows("val")
    return time.perf_counter() - start, reader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    clean, gone, event_bytes, notices = [], [], 0, 0
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.rounds):
            kept = persisted(Path(folder) / f"kept{i}", args.rollouts)
            emptied = persisted(Path(folder) / f"emptied{i}", args.rollouts)
            for path in (emptied.root / "rollouts" / "val").glob("*.json"):
                path.unlink()
            clean.append(check(kept.root)[0])
            seconds, reader = check(emptied.root)
            gone.append(seconds)
            lines = (emptied.root / "events.jsonl").read_text().splitlines()
            vanished = [line for line in lines if json.loads(line)["kind"] == "rollout_vanished"]
            assert len(vanished) == 1 and len(json.loads(vanished[0])["files"]) == args.rollouts
            event_bytes, notices = len(vanished[0]), len(reader.notices)
    base, found = statistics.median(clean), statistics.median(gone)
    print(f"{args.rollouts} val rollouts, median of {args.rounds}:")
    print(f"  check with nothing gone (baseline) {base * 1000:.1f} ms")
    print(f"  check finding all {args.rollouts} gone {found * 1000:.1f} ms ({found / base:.2f}x baseline)")
    print(f"  one rollout_vanished event of {event_bytes} bytes, {notices} notice line(s)")


if __name__ == "__main__":
    main()
