"""Why ``capevolve compare`` offers no non-inferiority margin yet: the obvious test is not
calibrated.

Run: python benchmarks/compare_margin.py [draws]   (default 1000 simulated comparisons per row)

The obvious non-inferiority test of H0: Δ ≤ δ (δ < 0, "no worse than δ") shifts every paired
delta by −δ and runs the exact sign-flip test on the shifted deltas. Its exactness needs each
shifted delta to be symmetric about 0 under H0, which nothing gives for bounded rewards: a tie
(d = 0) becomes +|δ| for sure. Each null comparison here sits on H0's boundary: per-task pass
rates 0.05, 0.5 or 0.95 for the baseline and exactly δ lower for the candidate (never clipped),
binary trials. A rate above α = 0.05 by more than 3 binomial standard errors is marked `!`.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_capevolve._stats.sign_flip import sign_flip_on_integers

ALPHA = 0.05
CELLS = [(12, 1, -0.05), (30, 1, -0.05), (30, 3, -0.02), (60, 2, -0.05), (12, 5, -0.05)]


def false_accepts(tasks: int, trials: int, margin: float, draws: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(draws):
        base = rng.choice([0.05, 0.5, 0.95], size=tasks)
        a = (rng.random((tasks, trials)) < base[:, None]).mean(axis=1)
        b = (rng.random((tasks, trials)) < (base + margin)[:, None]).mean(axis=1)
        shifted = np.round((b - a - margin) * 100 * trials).astype(np.int64)  # exact integers
        hits += sign_flip_on_integers(shifted, ALPHA).at_most(ALPHA)  # type: ignore[union-attr]
    return hits / draws


def main(draws: int) -> None:
    slack = 3 * (ALPHA * (1 - ALPHA) / draws) ** 0.5
    print(f"{draws} null comparisons per row at the margin's boundary, α = {ALPHA}")
    print(f"{'tasks':>5}  {'trials':>6}  {'margin':>6}  {'false accepts':>13}")
    for seed, (tasks, trials, margin) in enumerate(CELLS):
        rate = false_accepts(tasks, trials, margin, draws, seed)
        print(f"{tasks:>5}  {trials:>6}  {margin:>6}  {rate:>12.3f}{'!' if rate > ALPHA + slack else ' '}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
