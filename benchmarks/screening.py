"""What a microcase screen costs against the rollouts it saves, and how often a subset screen
kills a candidate that is no worse than the best.

Run: python benchmarks/screening.py [draws] [seed]   (defaults 2000, 2026; ratios against
baselines measured in the same run)

On a copy of examples/noisy_agent (its ten microcases: four text, three call, two score, one
adapter), for a candidate that fails one microcase:

1. the screen alone: the ten microcases run against the candidate, as the gate does before
   paying, timed in-process;
2. the rollouts it saves: the candidate's 40 val tasks × 5 trials, run through the same
   adapter in-process with no per-rollout latency (the cheapest agent there is; a real LLM
   rollout costs seconds and cents, so the real ratio is far larger);
3. per kind: the mean time of one microcase of each kind, against one text check.

Part 2, the subset screens' false-kill rate under the null: a byte-identical candidate (fresh
rollouts of the same per-task rates) screened against the best's persisted rollouts, tau2-like
per-task rates (the public tau2-bench airline run in tests/data), 5 trials, at 100 and 200 val
tasks, every tier. "chosen on all trials" is the old screen (tasks chosen from the best's
rollouts, harm tested against those same rollouts: regression to the mean reads as harm);
"held out" is today's (chosen on the best's first trial, tested on the other four). Each rate is
P(kill for proven harm), which must be ≤ screen_alpha; ± is its Monte Carlo SE.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_capevolve._decide import screen as ladder  # noqa: E402
from pytest_capevolve._engine.checks import ProjectEnv, run  # noqa: E402
from pytest_capevolve._engine.runner import AdapterRunner, run_and_score  # noqa: E402
from pytest_capevolve._project.microcase import load_project  # noqa: E402
from pytest_capevolve._stats import task_means  # noqa: E402

DATA = REPO / "tests" / "data" / "tau2-airline-v4-val-per-task.json"
SCREEN_ALPHA = 0.05  # the spec's default screen_alpha
TRIALS = 5


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


def tau2_rates() -> np.ndarray:
    data = json.loads(DATA.read_text())
    arms = ("seed", "c0_null5", "c0_null5b", "c0_null5c")
    return np.array([np.mean([r for a in arms for r in data[a][t]["trials"]]) for t in sorted(data["seed"])])


def false_kills(rng: np.random.Generator, n: int, tier: int, draws: int) -> dict[str, float]:
    """P(a null candidate is killed for proven harm), old and held-out screens, same draws."""
    pool = tau2_rates()
    ids = [f"t{i:03d}" for i in range(n)]
    kills = {"all": 0, "held_out": 0}
    for draw in range(draws):
        rates = rng.choice(pool, size=n)
        best = (rng.random((n, TRIALS)) < rates[:, None]).astype(float)
        cand = (rng.random((n, TRIALS)) < rates[:, None]).astype(float)  # the same bytes, re-run
        run_id = f"run{draw}"
        old_means = dict(zip(ids, task_means(best).tolist(), strict=True))
        rows = [ids.index(t) for t in ladder.select(old_means, run_id, "cand", tier)]
        old = ladder.decide_screen(cand[rows], best[rows], alpha=SCREEN_ALPHA)
        kills["all"] += old.decision == ladder.KILL
        means = ladder.selection_means(best, ids, TRIALS)
        rows = [ids.index(t) for t in ladder.select(means, run_id, "cand", tier)]
        new = ladder.decide_screen(cand[rows], best[rows], alpha=SCREEN_ALPHA, num_trials=TRIALS)
        kills["held_out"] += new.decision == ladder.KILL
    return {k: v / draws for k, v in kills.items()}


def screen_calibration(draws: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    print(
        f"\nsubset screens, byte-identical candidates: P(killed for proven harm), {draws} draws per "
        f"cell, seed {seed}, screen_alpha = {SCREEN_ALPHA}, {TRIALS} trials, tau2-like rates"
    )
    print(f"{'tasks':>5} {'tier':>4} {'screened':>8} {'chosen on all trials':>22} {'held out':>18}")
    started = time.perf_counter()
    for n in (100, 200):
        for tier in ladder.TIERS:
            rates = false_kills(rng, n, tier, draws)
            shown = [
                f"{r:.4f} ± {math.sqrt(r * (1 - r) / draws):.4f}" for r in (rates["all"], rates["held_out"])
            ]
            print(f"{n:>5} {tier:>4} {ladder.screen_size(n, tier):>8} {shown[0]:>22} {shown[1]:>18}")
    print(f"(part 2: {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
    screen_calibration(
        int(sys.argv[1]) if len(sys.argv) > 1 else 2000, int(sys.argv[2]) if len(sys.argv) > 2 else 2026
    )
