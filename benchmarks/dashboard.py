"""What writing dashboard.html adds to the end of a session, against refreshing report.md.

Run: python benchmarks/dashboard.py [TASKS] [TAGS]   (defaults: 200 val tasks, 10 tags)

A synthetic run dir (written through RunDir: TASKS val tasks × 5 trials × TAGS tags, verdicts
for every tag but the seed, one decision per verdict) is read back the way a session's end
does: report.md = measure() + render_markdown(); the dashboard = collect + render, handed the
val records the session has already read. Prints both times (best of 3) and their ratio, and
the page's size per rollout.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

from pytest_capevolve._project.spec import load_spec
from pytest_capevolve._show.dashboard import build
from pytest_capevolve._show.measure import measure, render_markdown
from pytest_capevolve._store.readers.evidence import index_records
from pytest_capevolve._store.rollouts.record import RolloutRecord
from pytest_capevolve._store.rundir import RunDir

REPO = Path(__file__).resolve().parent.parent
TRIALS = 5


def synthetic_run(root: Path, n_tasks: int, n_tags: int) -> RunDir:
    rundir = RunDir(root / ".capevolve" / "runs" / "bench")
    rundir.root.mkdir(parents=True)
    tasks = [f"t{i:04d}" for i in range(n_tasks)]
    rundir.ensure_splits(lambda: {"train": [], "val": tasks, "test": []})
    rng = random.Random(0)
    tags = ["seed"] + [f"cand{i}" for i in range(1, n_tags)]
    for tag in tags:
        for task in tasks:
            for k in range(TRIALS):
                reward = float(rng.random() < 0.6)
                rundir.rollouts.write_rollout(
                    RolloutRecord(
                        "bench",
                        "val",
                        task,
                        tag,
                        k,
                        k,
                        "h",
                        reward=reward,
                        feedback="ticket escalated: customer not helped" * (reward == 0),
                        output="escalated" if reward == 0 else "resolved",
                        cost_usd=0.002,
                    )
                )
                rundir.log.append_event(
                    "rollout",
                    split="val",
                    task_id=task,
                    tag=tag,
                    trial=k,
                    reward=reward,
                    infra_error=None,
                    cost_usd=0.002,
                )
    for tag in tags[1:]:
        rundir.verdicts.write_verdict(
            {
                "tag": tag,
                "against": "seed",
                "decision": "reject",
                "basis": "exact",
                "n_tasks": n_tasks,
                "delta_mean": 0.01,
                "ci": [-0.05, 0.07],
                "p_value": 0.4,
                "bar": 0.02,
                "reason": "p > alpha",
            }
        )
        rundir.log.append_event(
            "decision", tag=tag, parent="seed", decision="reject", basis="gate", delta_mean=0.01, p_value=0.4
        )
    return rundir


def best_of(runs: int, work) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    n_tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    n_tags = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    spec = load_spec(REPO / "examples" / "noisy_agent")  # 5 trials, as the synthetic run
    with tempfile.TemporaryDirectory() as tmp:
        rundir = synthetic_run(Path(tmp), n_tasks, n_tags)
        val = index_records(rundir.rollouts.rollouts("val"))
        report_s, m = best_of(
            3, lambda: (lambda m: (render_markdown(m), m)[1])(measure(spec, rundir, {"val": val}))
        )
        page_s, page = best_of(3, lambda: build(rundir, TRIALS, m, val))
    rollouts = n_tasks * n_tags * TRIALS
    print(f"synthetic run: {n_tasks} val tasks × {TRIALS} trials × {n_tags} tags = {rollouts} rollouts")
    print(f"report.md (measure + render):  {report_s * 1000:8.1f} ms  (baseline 1.00)")
    print(
        f"dashboard.html (collect + render): {page_s * 1000:8.1f} ms  ({page_s / report_s:.2f}× the report)"
    )
    print(
        f"page size: {len(page.encode()) / 1024:.0f} KiB ({len(page.encode()) / rollouts:.0f} bytes per rollout)"
    )


if __name__ == "__main__":
    main()
