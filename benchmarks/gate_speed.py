"""Time gating 20 candidates on 10,000 tasks × 10 trials (goal: full verdicts under 1 s).

Run: python benchmarks/gate_speed.py [--tasks N] [--trials K] [--candidates C]
Prints the decision time (exact sign-flip test) and the full verdict time (plus the CI,
regressions, per-task table; goal ≤ 1 s), each also as a ratio against one numpy pass over the
same matrices measured in the same run (these machines are noisy), and full against decisions.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pytest_capevolve import stats
from pytest_capevolve.decide import gate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--candidates", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    tasks, trials, candidates = args.tasks, args.trials, args.candidates
    rates = rng.beta(0.6, 0.6, size=tasks)
    best = (rng.random((tasks, trials)) < rates[:, None]).astype(float)
    arms = [
        (rng.random((tasks, trials)) < np.clip(rates + 0.01 * i, 0, 1)[:, None]).astype(float)
        for i in range(candidates)
    ]
    ids = [f"t{i}" for i in range(tasks)]

    # imports (scipy: ~1 CPU-s) are paid before any clock starts, on arms too small to be the
    # ones measured (so the best's shared summary is not computed ahead of the clock)
    gate.decide(arms[0][:50], best[:50], tag="w", against="b", task_ids=ids[:50], config=gate.GateConfig())
    stats.sign_flip_test(arms[0][:50], best[:50])

    start = time.perf_counter()
    for arm in arms:
        np.nanmean(arm, axis=1) - np.nanmean(best, axis=1)
    baseline = time.perf_counter() - start

    start = time.perf_counter()
    decisions = [stats.sign_flip_test(arm, best, alpha=0.05).at_most(0.05) for arm in arms]
    decide_time = time.perf_counter() - start

    start = time.perf_counter()
    verdicts = [
        gate.decide(arm, best, tag=f"c{i}", against="best", task_ids=ids, config=gate.GateConfig())
        for i, arm in enumerate(arms)
    ]
    full_time = time.perf_counter() - start
    assert [v.decision == "accept" for v in verdicts] == decisions

    print(f"{candidates} candidates × {tasks} tasks × {trials} trials")
    print(f"  numpy baseline (per-task mean deltas): {baseline:.3f}s")
    print(
        f"  exact gate decisions:                  {decide_time:.3f}s  ({decide_time / baseline:.0f}x baseline)"
    )
    print(
        f"  full verdicts (CI, table):             {full_time:.3f}s  ({full_time / baseline:.0f}x baseline, "
        f"{full_time / decide_time:.1f}x decisions; CI: {verdicts[0].ci_method})"
    )
    print(f"  accepted: {sum(decisions)} of {candidates}")


if __name__ == "__main__":
    main()
