"""What checking a decision's views against the log costs (issue 24), each against a baseline
measured in the same run:

1. the events a decision reads (the best's, the seal's, a verdict's) found by their bytes in a
   60,000-rollout log, against decoding the whole log;
2. (``--resume``) every rollout outcome a reader is handed held to the log (the outcome ledger:
   the index's rows checked against the leaving session's logged digest, then each row against
   it), against a whole 60,000-rollout resume (``pytest --capevolve-run`` with everything
   persisted) — goal ≤ 10 %; and the ledger built from the rollout lines (no digest logged),
   which a reader pays once after a crash; and the first checked read of ``state.json`` (its
   counters and spend held to the log) in the same run, and the two together.

    python benchmarks/verified_reads.py [--rollouts N] [--resume]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

from pytest_capevolve._store.log.events import EventLog


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--resume", action="store_true", help="also section 2 (makes a 60k run: minutes)")
    args = parser.parse_args()
    if args.resume:
        resume_section(args.rollouts)
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
            infra_error=None,
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


def resume_section(rollouts: int) -> None:
    import os
    import statistics
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from overhead import make_project, session_command

    from pytest_capevolve._store.log.outcome_ledger import OutcomeLedger, outcome
    from pytest_capevolve._store.rundir import RunDir

    trials = 3
    tasks = rollouts // (trials * 2)
    tmp = Path(tempfile.mkdtemp(prefix="capevolve-ledger-"))
    os.environ.update(BENCH_TASKS=str(tasks), BENCH_SLEEP="0")
    project = make_project(tmp / "scale", trials)
    (project / "cand").mkdir()
    (project / "cand" / "prompt.md").write_text("hello again\n")
    command = session_command(project)
    command += ["--capevolve-candidate", str(project / "cand")]
    subprocess.run(command, cwd=project, check=True, stdout=subprocess.DEVNULL)  # the fresh run
    cpus = []  # CPU seconds, not wall: on a shared machine the wall measures the neighbours
    for _ in range(3):
        process = subprocess.Popen(command, cwd=project, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        cpus.append(usage.ru_utime + usage.ru_stime)
    resume = statistics.median(cpus)
    run_root = next((project / ".capevolve" / "runs").iterdir())

    def ledger_cost(*, digest: bool) -> float:
        costs = []
        for _ in range(5):
            rundir = RunDir(run_root)
            rows = rundir.rollouts.index.rows("val")  # what the reader reads anyway
            start = time.process_time()
            log = rundir.log if digest else _without_checkpoints(rundir.log)
            truth = OutcomeLedger(log, rundir.rollouts._file_of).current(rundir.rollouts.index.every)
            mismatched = sum(truth.get((r[0], r[1], r[2], r[3])) != outcome(r[4], r[6], r[7]) for r in rows)
            costs.append(time.process_time() - start)
            assert mismatched == 0, f"{mismatched} rows differ from the log"
        return statistics.median(costs)

    def state_cost() -> float:
        costs = []
        for _ in range(5):
            rundir = RunDir(run_root)  # a fresh process's view: its first checked read of the state
            start = time.process_time()
            rundir.state.read_state()
            costs.append(time.process_time() - start)
        return statistics.median(costs)

    checked, from_lines = ledger_cost(digest=True), ledger_cost(digest=False)
    state = state_cost()
    print(f"a {rollouts:,}-rollout run: resume (everything persisted) {resume:.2f} CPU s")
    print(
        f"  outcomes held to the log (digest logged): {checked * 1e3:.0f} CPU ms = {checked / resume:.1%} of the resume"
    )
    print(
        f"  the same from the rollout lines (once, after a crash): {from_lines * 1e3:.0f} CPU ms = {from_lines / resume:.1%}"
    )
    print(
        f"  state.json held to the log (first read): {state * 1e3:.0f} CPU ms = {state / resume:.1%} of the resume"
    )
    print(
        f"  verification on every read, together: {(checked + state) / resume:.1%} of the resume (goal: 10 %)"
    )


def _without_checkpoints(log: EventLog) -> EventLog:
    """The log as a reader sees it when no session left a digest (a crash): the ledger reads
    every rollout line."""
    of_kinds = log.of_kinds
    log.of_kinds = lambda *kinds: [] if "outcomes_checked" in kinds else of_kinds(*kinds)  # type: ignore[method-assign]
    return log


if __name__ == "__main__":
    main()
