"""Margins: "no worse than δ" (non-inferiority) and "within ±m" (equivalence), valid at any n.

The gate's sign-flip test answers "is the candidate better?" exactly because, when it is not,
each paired delta is as likely up as down. "No worse than δ" (H0: E[Δ̄] ≤ δ, δ < 0) has no such
symmetry: shifting every delta by −δ and flipping signs is not calibrated for bounded rewards (a
tie becomes +|δ| for sure; benchmarks/compare_margin.py measures the false accepts). So the
margin test is a *betting* test with bets fixed before the data (Waudby-Smith & Ramdas 2024,
"Estimating means of bounded random variables by betting", with a fixed grid of bets mixed):

    E(δ) = (1/J) Σ_j Π_t (1 + λ_j(δ) · (d_t − δ)),   λ_j(δ) = c_j / (1 + δ),  c_j ∈ (0, 0.95]

The c_j depend on n only (three bets around the one that would just reach 1/0.05 at the
detection boundary, for per-task spreads σ from 1/6 to 2/3), never on the deltas' values nor on
the level tested: p is one number whatever level it is read at (Holm's step-down levels, an α
schedule), as a p-value must be for those procedures to hold.

Why it is valid for rewards in [0, 1] whatever their distribution, at 12 tasks as at 10,000:
d_t ≥ −1, so every factor is ≥ 1 − c_j > 0; the tasks are independent, so the expectation of
each product is Π_t (1 + λ_j(μ_t − δ)) ≤ exp(λ_j Σ_t (μ_t − δ)) ≤ 1 whenever the tasks' mean
true delta Σ_t μ_t / n is ≤ δ (the null is the mean over *these* tasks, each task's rates
free); a mixture of such products also has expectation ≤ 1, and Markov's inequality gives
P(E ≥ 1/α) ≤ α. p = min(1, 1/E). A per-task mean over k trials (0, 1/k, …, 1) is such a reward.

Bets fixed in advance (not chosen from the tasks before, as the sequential gate's are) make the
test depend on the tasks as a set, never on their order, and make E(δ) fall as δ rises (each
factor's slope in δ is −c_j(1 + d_t)/(1 + δ)² ≤ 0), so the tested margins form an interval whose
end is the lower confidence bound reported beside p. Equivalence is two one-sided tests (TOST):
E[Δ̄] > −m and E[Δ̄] < m, each at α; p is the larger of the two.

The price of holding for every distribution: the test is conservative (its false accepts are
far below α at most nulls) and needs more tasks than the sign-flip test does for superiority;
benchmarks/compare_margin.py prints its power beside the uncalibrated shift test's.
Pure, on numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SCALES = np.array([1.5, 3.0, 6.0])  # c_j = scale · √(2 log 20 / n): bets for 1/σ of 1.5 to 6
NON_INFERIORITY, EQUIVALENCE = "non_inferiority", "equivalence"
METHOD = "betting e-value, fixed bets (Waudby-Smith & Ramdas 2024), p = min(1, 1/E)"


def bets(n: int) -> np.ndarray:
    """The c_j for ``n`` tasks: fixed before any delta is seen."""
    return np.minimum(0.95, SCALES * math.sqrt(2.0 * math.log(20.0) / max(n, 1)))


def log_e_value(deltas: np.ndarray, margin: float) -> float:
    """log E(δ) against H0: mean true delta ≤ ``margin`` (δ ∈ (−1, 1)); large when the deltas
    sit well above δ. ``deltas``: per-task paired deltas in [−1, 1] (nan-free)."""
    d = np.asarray(deltas, dtype=float).ravel()
    if not -1.0 < margin < 1.0:
        raise ValueError(f"a margin must lie in (−1, 1), got {margin}")
    if d.size and (np.isnan(d).any() or d.min() < -1.0 or d.max() > 1.0):
        raise ValueError("per-task deltas must lie in [−1, 1] and not be nan")
    d = np.sort(d)  # one summation order: the same tasks in any order give the same bits
    stakes = bets(d.size) / (1.0 + margin)
    logs = np.log1p(np.outer(stakes, d - margin)).sum(axis=1)  # one log-product per bet
    top = float(logs.max())
    return top + math.log(float(np.exp(logs - top).mean()))


def p_above(deltas: np.ndarray, margin: float) -> float:
    """p against H0: mean true delta ≤ ``margin``."""
    return min(1.0, math.exp(-log_e_value(deltas, margin)))


def p_below(deltas: np.ndarray, margin: float) -> float:
    """p against H0: mean true delta ≥ ``margin`` (the mirror image: −d against −margin)."""
    return p_above(-np.asarray(deltas, dtype=float), -margin)


def lower_bound(deltas: np.ndarray, alpha: float) -> float:
    """The largest δ that the deltas still reject at ``alpha`` (−1 when none does): with
    confidence 1 − α the mean true delta is above it. Bisection on the monotone E(δ)."""
    d = np.asarray(deltas, dtype=float)
    target = math.log(1.0 / alpha)
    low, high = -1.0, 1.0  # E(δ) ≥ 1/α is an interval (−1, L]
    if d.size == 0 or log_e_value(d, low + 1e-9) < target:
        return -1.0
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if log_e_value(d, mid) >= target else (low, mid)
    return low


@dataclass(frozen=True)
class MarginResult:
    """One margin test: what was asked, its p, and the bounds it rests on."""

    kind: str  # NON_INFERIORITY or EQUIVALENCE
    margin: float  # δ (< 0) for non-inferiority; m (> 0) for equivalence (±m)
    p_value: float
    lower: float  # 1 − α lower confidence bound on the mean true delta
    upper: float | None  # equivalence only: the 1 − α upper bound
    alpha: float

    @property
    def question(self) -> str:
        if self.kind == EQUIVALENCE:
            return f"within ±{self.margin:g} of the baseline"
        return f"no worse than {self.margin:+g}"

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "margin": self.margin,
            "question": self.question,
            "p_value": self.p_value,
            "lower": self.lower,
            "upper": self.upper,
            "method": METHOD,
        }


def margin_test(deltas: np.ndarray, *, kind: str, margin: float, alpha: float) -> MarginResult:
    """Non-inferiority (H0: mean ≤ δ, δ ∈ (−1, 0]) or equivalence (H0: mean ≤ −m or ≥ m,
    m ∈ (0, 1)) on per-task deltas; accept when ``p_value ≤ alpha``."""
    d = np.asarray(deltas, dtype=float)
    if kind == NON_INFERIORITY:
        if not -1.0 < margin <= 0.0:
            raise ValueError(f"a non-inferiority margin lies in (−1, 0], got {margin}")
        return MarginResult(kind, margin, p_above(d, margin), lower_bound(d, alpha), None, alpha)
    if kind == EQUIVALENCE:
        if not 0.0 < margin < 1.0:
            raise ValueError(f"an equivalence bound lies in (0, 1), got {margin}")
        p = max(p_above(d, -margin), p_below(d, margin))
        return MarginResult(kind, margin, p, lower_bound(d, alpha), -lower_bound(-d, alpha), alpha)
    raise ValueError(f"unknown margin kind {kind!r}; use {NON_INFERIORITY} or {EQUIVALENCE}")
