"""What a microcase screen costs against the rollouts it saves.

Run: python benchmarks/screening.py   (ratios against baselines measured in the same run)

On a copy of examples/noisy_agent (its ten microcases: four text, three call, two score, one
adapter), for a candidate that fails one microcase:

1. the screen alone: the ten microcases run against the candidate, as the gate does before
   paying, timed in-process;
2. the rollouts it saves: the candidate's 40 val tasks × 5 trials, run through the same
   adapter in-process with no per-rollout latency (the cheapest agent there is; a real LLM
   rollout costs seconds and cents, so the real ratio is far larger);
3. per kind: the mean time of one microcase of each kind, against one text check.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_capevolve._engine.checks import ProjectEnv, run  # noqa: E402
from pytest_capevolve._engine.runner import AdapterRunner, run_and_score  # noqa: E402
from pytest_capevolve._project.microcase import load_project  # noqa: E402


def best_of(repeats: int, work) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "noisy_agent"
        shutil.copytree(
            REPO / "examples" / "noisy_agent", project, ignore=shutil.ignore_patterns(".capevolve")
        )
        candidate = project / "candidates" / "regressed"
        env = ProjectEnv.load(project)
        cases = load_project(project)
        env.runner()  # load the adapter once, as a session does

        def screen() -> None:
            outcomes = [run(case, candidate, env) for case in cases]
            assert sum(not o.ok for o in outcomes) == 1

        runner = AdapterRunner(env.runner().adapter)
        pool = [env.task(f"n{i:02d}") for i in range(40)]

        def rollouts() -> None:
            for task in pool:
                for trial in range(5):
                    run_and_score(runner, task, candidate, seed=100 + trial, split="val")

        screen_s = best_of(3, screen)
        rollouts_s = best_of(3, rollouts)
        print(f"screen: {len(cases)} microcases in {screen_s * 1000:.0f} ms")
        print(f"saved:  200 zero-latency rollouts in {rollouts_s * 1000:.0f} ms")
        print(f"screen / saved rollouts = {screen_s / rollouts_s:.2f}× (0 rollouts paid by the screen)")
        print(f"break-even per-rollout latency: {screen_s / 200 * 1000:.2f} ms")

        by_kind: dict[str, list[float]] = {}
        for case in cases:
            by_kind.setdefault(case.kind, []).append(best_of(3, lambda c=case: run(c, candidate, env)))
        text = sum(by_kind["text"]) / len(by_kind["text"])
        for kind, times in sorted(by_kind.items()):
            mean = sum(times) / len(times)
            print(f"{kind:8s} {mean * 1000:8.2f} ms per microcase  = {mean / text:8.1f}× a text check")


if __name__ == "__main__":
    main()
