"""What `capevolve import-cap-evolve --run` costs against copying the cap-evolve run's bytes.

Builds a cap-evolve project and run dir in cap-evolve's layout (12 val × 5 trials of the six
tags of the real tau2 run in tests/data, repeated to N tasks), then, alternated in rounds:
(a) ``shutil.copytree`` of the run dir (the baseline: moving the bytes), (b) the import (every
rollout checked, written and logged through the run dir, the candidates hashed). Prints the
medians, rollouts per second, and the ratio of (b) to (a).

    python benchmarks/cap_evolve_import.py [--tasks N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from pytest_capevolve._loop.cap_evolve.importer import import_cap_evolve

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "tau2-airline-v4-val-per-task.json"
ADAPTER = """from cap_evolve import CapabilityAdapter, Rollout, Score, Task


class Adapter(CapabilityAdapter):
    def tasks(self, split):
        return [Task(id=str(i)) for i in range({n})]

    def run_target(self, task, ctx, *, seed=0):
        return Rollout(task_id=task.id, output=str(seed))

    def score(self, task, rollout):
        return Score(task_id=task.id, reward=1.0)
"""


def build(root: Path, n_tasks: int) -> tuple[Path, Path]:
    shared = json.loads(DATA.read_text())
    project = root / ".capevolve" / "project"
    (project / "adapters").mkdir(parents=True)
    (project / "adapters" / "adapter.py").write_text(ADAPTER.format(n=n_tasks))
    (project / "seed_capability").mkdir()
    (project / "seed_capability" / "prompt.md").write_text("Be careful.\n")
    (project / "capevolve.yaml").write_text(
        "capability_path: seed_capability\nnum_trials: 5\ngate_mode: paired\n"
    )
    run = root / ".capevolve" / "run_20260101_000000"
    (run / "rollouts" / "val").mkdir(parents=True)
    ids = [str(i) for i in range(n_tasks)]
    (run / "splits.json").write_text(json.dumps({"train": [], "val": ids, "test": [], "seed": 0}))
    (run / "state.json").write_text(json.dumps({"best_id": "seed"}))
    real = sorted(shared["seed"], key=int)
    for tag, per_task in shared.items():
        shutil.copytree(project / "seed_capability", run / "candidates" / tag)
        for i, tid in enumerate(ids):
            row = per_task[real[i % len(real)]]
            for k, reward in enumerate(row["trials"]):
                body = {
                    "input": None,
                    "rollout": {"task_id": tid, "output": "", "error": None},
                    "score": {"task_id": tid, "reward": reward, "feedback": row["feedback"]},
                }
                (run / "rollouts" / "val" / f"{tid}__{tag}__t{k}.json").write_text(json.dumps(body))
    return project, run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project, run = build(Path(tmp) / "src", args.tasks)
        rollouts = sum(1 for _ in (run / "rollouts" / "val").iterdir())
        copy, imported = [], []
        for i in range(args.rounds):
            started = time.perf_counter()
            shutil.copytree(run, Path(tmp) / f"copy{i}")
            copy.append(time.perf_counter() - started)
            started = time.perf_counter()
            import_cap_evolve(project, Path(tmp) / f"dest{i}", run)
            imported.append(time.perf_counter() - started)
    base, cost = statistics.median(copy), statistics.median(imported)
    print(f"{rollouts} rollouts ({args.tasks} tasks × 5 trials × 6 tags), median of {args.rounds} rounds")
    print(f"  copytree of the run dir  {base:7.3f} s")
    print(
        f"  import-cap-evolve --run  {cost:7.3f} s  ({rollouts / cost:,.0f} rollouts/s)  ×{cost / base:.1f} the copy"
    )


if __name__ == "__main__":
    main()
