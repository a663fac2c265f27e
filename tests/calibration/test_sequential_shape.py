"""The sequential gate's efficacy crossing against a candidate no better on average whose outcomes differ in
shape (session 28's attack on the (a, b) bets, which crossed for it 0.885 of the time on fair-coin tasks and
0.097 on τ² rates before they were taken out): the best's rate on every task and trial, its passes spread
evenly over its trials (⌊kr⌋ or ⌈kr⌉ of k, mean kr — what a lower temperature can do). The delta e-process's
bet is λ·d, fair against every law of mean delta ≤ 0, so it crosses at most α of the time; a bet on the
shape of (a, b) would not."""

from __future__ import annotations

import numpy as np

from pytest_capevolve._decide import stopping
from pytest_capevolve._stats import sequential as seq

from .test_sequential_power import tau2_rates

ALPHA = 0.05
DRAWS, TRIALS = 2000, 3


def evenly_spread(rng: np.random.Generator, rates: np.ndarray, trials: int) -> np.ndarray:
    """Per task (rows of ``rates``' last axis), ⌊kr⌋ or ⌈kr⌉ passes of k on random trials: mean kr."""
    low = np.floor(trials * rates)
    passes = low + (rng.random(rates.shape) < trials * rates - low)
    ranks = np.argsort(rng.random((*rates.shape, trials)), axis=-1)
    return (ranks < passes[..., None]).astype(float)


def crossing_rate(rates: np.ndarray, rng: np.random.Generator, trials: int) -> float:
    best = (rng.random((*rates.shape, trials)) < rates[..., None]).astype(float)
    shaped = evenly_spread(rng, rates, trials)
    deltas = shaped.mean(axis=-1) - best.mean(axis=-1)
    levels = stopping.split(ALPHA)
    code, _ = seq.first_crossings(
        deltas,
        alpha_efficacy=float(levels.efficacy),
        alpha_futility=float(levels.futility),
        min_effect=0.05,
    )
    return float(np.mean(code == 1))


def test_a_candidate_of_the_best_rate_shaped_otherwise_crosses_at_most_alpha() -> None:
    bound = ALPHA + 2.33 * np.sqrt(ALPHA * (1 - ALPHA) / DRAWS)  # one-sided 99 %: 0.061
    rng = np.random.default_rng(28)
    tau2 = crossing_rate(rng.choice(tau2_rates(), size=(DRAWS, 55)), rng, TRIALS)
    coins = crossing_rate(np.full((DRAWS, 120), 0.5), rng, 2)  # one pass of two, always
    assert tau2 <= bound, tau2
    assert coins <= bound, coins
