"""Margins for ``capevolve compare`` and the gate: the betting test against the obvious one.

Run: python benchmarks/compare_margin.py [draws]   (default 1000 simulated comparisons per row)

The obvious non-inferiority test of H0: Δ ≤ δ (δ < 0, "no worse than δ") shifts every paired
delta by −δ and runs the exact sign-flip test on the shifted deltas. Its exactness needs each
shifted delta to be symmetric about 0 under H0, which nothing gives for bounded rewards: a tie
(d = 0) becomes +|δ| for sure. The test the package uses (:mod:`pytest_capevolve._stats.margin`)
is a betting test with fixed bets, valid for any rewards in [0, 1] (Markov's inequality).

Null rows sit on H0's boundary: per-task pass rates 0.05, 0.5 or 0.95 for the baseline and
exactly δ lower for the candidate (never clipped), binary trials, per-task means over trials.
A false-accept rate above α = 0.05 by more than 3 binomial standard errors is marked `!`.
Power rows: the candidate's rates equal the baseline's (true effect +0.00), δ = −0.05.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_capevolve._stats.margin import p_above
from pytest_capevolve._stats.sign_flip import sign_flip_on_integers

ALPHA = 0.05
NULL_CELLS = [(12, 1, -0.05), (30, 1, -0.05), (30, 3, -0.02), (60, 2, -0.05), (12, 5, -0.05), (200, 3, -0.05)]
POWER_CELLS = [(12, 5), (60, 3), (200, 3), (500, 3), (1000, 3)]
RATES = [0.05, 0.5, 0.95]


def draw(rng: np.random.Generator, tasks: int, trials: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-task means of the baseline and the candidate (rates shifted by ``shift``)."""
    base = rng.choice(RATES, size=tasks)
    a = (rng.random((tasks, trials)) < base[:, None]).mean(axis=1)
    b = (rng.random((tasks, trials)) < (base + shift)[:, None]).mean(axis=1)
    return a, b


def accepts(
    tasks: int, trials: int, shift: float, margin: float, draws: int, seed: int
) -> tuple[float, float]:
    """How often (naive shift test, betting test) accept "no worse than ``margin``"."""
    rng = np.random.default_rng(seed)
    naive = betting = 0
    for _ in range(draws):
        a, b = draw(rng, tasks, trials, shift)
        shifted = np.round((b - a - margin) * 100 * trials).astype(np.int64)  # exact integers
        naive += bool(sign_flip_on_integers(shifted, ALPHA).at_most(ALPHA))  # type: ignore[union-attr]
        betting += p_above(b - a, margin) <= ALPHA
    return naive / draws, betting / draws


def main(draws: int) -> None:
    slack = 3 * (ALPHA * (1 - ALPHA) / draws) ** 0.5
    print(f"{draws} null comparisons per row at the margin's boundary (true Δ = δ), α = {ALPHA}")
    print(f"{'tasks':>5}  {'trials':>6}  {'margin':>6}  {'naive shift':>11}  {'betting':>8}")
    for seed, (tasks, trials, margin) in enumerate(NULL_CELLS):
        naive, betting = accepts(tasks, trials, margin, margin, draws, seed)
        marks = ["!" if r > ALPHA + slack else " " for r in (naive, betting)]
        print(f"{tasks:>5}  {trials:>6}  {margin:>6}  {naive:>10.3f}{marks[0]}  {betting:>7.3f}{marks[1]}")
    print(f"\npower: true Δ = +0.00, δ = −0.05, {draws} comparisons per row")
    print(f"{'tasks':>5}  {'trials':>6}  {'naive shift':>11}  {'betting':>8}  {'ratio':>6}")
    for seed, (tasks, trials) in enumerate(POWER_CELLS, start=100):
        naive, betting = accepts(tasks, trials, 0.0, -0.05, draws, seed)
        ratio = betting / naive if naive else float("nan")
        print(f"{tasks:>5}  {trials:>6}  {naive:>11.3f}  {betting:>8.3f}  {ratio:>6.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
