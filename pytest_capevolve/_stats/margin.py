"""Margins: "no worse than δ" (non-inferiority) and "within ±m" (equivalence), valid at any n.

Shifting deltas by −δ and flipping signs is not calibrated for bounded rewards
(benchmarks/compare_margin.py), so this is a betting test with bets fixed before the data (Waudby-Smith &
Ramdas 2024): E(δ) = (1/J) Σ_j Π_t (1 + λ_j(δ)·(d_t − δ)), λ_j(δ) = c_j / (1 + δ). The c_j depend on n
only, so p = min(1, 1/E) is one number at any level; d_t ≥ −1 keeps every factor positive, and Markov gives
P(E ≥ 1/α) ≤ α. E(δ) falls as δ rises, so the rejected margins end at the reported lower bound.
Equivalence is two one-sided tests. Conservative next to the sign-flip test. Pure."""

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
    """log E(δ) against H0: mean true delta ≤ ``margin`` (δ ∈ (−1, 1)). ``deltas``: per-task paired deltas
    in [−1, 1], nan-free."""
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
    return min(1.0, math.exp(-log_e_value(deltas, margin)))


def p_below(deltas: np.ndarray, margin: float) -> float:
    """p against H0: mean true delta ≥ ``margin`` (−d against −margin)."""
    return p_above(-np.asarray(deltas, dtype=float), -margin)


def lower_bound(deltas: np.ndarray, alpha: float) -> float:
    """The largest δ the deltas still reject at ``alpha`` (−1 when none), by bisection on monotone E(δ)."""
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
    kind: str  # NON_INFERIORITY or EQUIVALENCE
    margin: float  # δ (< 0) for non-inferiority; m (> 0) for equivalence (±m)
    p_value: float
    lower: float  # 1 − α lower confidence bound on the mean true delta
    upper: float | None  # equivalence only: the 1 − α upper bound

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
    """Non-inferiority (H0: mean ≤ δ, δ ∈ (−1, 0]) or equivalence (H0: mean ≤ −m or ≥ m) on per-task
    deltas; accept when ``p_value ≤ alpha``."""
    d = np.asarray(deltas, dtype=float)
    if kind == NON_INFERIORITY:
        if not -1.0 < margin <= 0.0:
            raise ValueError(f"a non-inferiority margin lies in (−1, 0], got {margin}")
        return MarginResult(kind, margin, p_above(d, margin), lower_bound(d, alpha), None)
    if kind == EQUIVALENCE:
        if not 0.0 < margin < 1.0:
            raise ValueError(f"an equivalence bound lies in (0, 1), got {margin}")
        p = max(p_above(d, -margin), p_below(d, margin))
        return MarginResult(kind, margin, p, lower_bound(d, alpha), -lower_bound(-d, alpha))
    raise ValueError(f"unknown margin kind {kind!r}; use {NON_INFERIORITY} or {EQUIVALENCE}")
