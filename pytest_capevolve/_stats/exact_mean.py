"""The mean paired delta as an exact rational, for comparisons no float rounding may decide.

Two arrangements of the same rewards can differ in the last bit as floats, so "Δ̄ exceeds the nulls' spread"
is decided on fractions: rewards on a grid read as k/G, others as the rational each float is."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from .core import as_matrix
from .sign_flip import grid_sums, reward_grid, scaled_deltas


def exact_task_deltas(
    candidate: np.ndarray, best: np.ndarray, rows: Sequence[int] | None = None
) -> list[Fraction]:
    """m_t(candidate) − m_t(best) as fractions over tasks valid on both sides, in task order. ``rows``:
    only these tasks, read on the whole matrices' grid."""
    candidate, best = as_matrix(candidate), as_matrix(best)
    grid = reward_grid(candidate, best)
    counts = [(~np.isnan(m)).sum(axis=1) for m in (candidate, best)]
    valid = (counts[0] > 0) & (counts[1] > 0)
    if rows is not None:
        keep = np.zeros_like(valid)
        keep[list(rows)] = True
        valid &= keep
    both = np.flatnonzero(valid)
    nc, nb = (c[both].tolist() for c in counts)
    if grid is not None:  # integer sums: one fraction per task, (s_c·n_b − s_b·n_c) / (G·n_c·n_b)
        sc, sb = (grid_sums(m, grid)[both].tolist() for m in (candidate, best))
        return [Fraction(a * d - b * c, grid * c * d) for a, b, c, d in zip(sc, sb, nc, nb, strict=True)]
    fc, fb = (_float_sums(m[both]) for m in (candidate, best))
    return [a / c - b / d for a, b, c, d in zip(fc, fb, nc, nb, strict=True)]


def _float_sums(matrix: np.ndarray) -> list[Fraction]:
    return [
        sum((Fraction(r) for r in row if r == r), Fraction(0)) for row in matrix.tolist()
    ]  # r == r: not nan


def exact_mean_delta(candidate: np.ndarray, best: np.ndarray) -> Fraction | None:
    """Δ̄ over tasks valid on both sides as one fraction (None when none): on a grid, one integer sum in
    numpy; off it, :func:`exact_task_deltas` averaged."""
    candidate, best = as_matrix(candidate), as_matrix(best)
    grid = reward_grid(candidate, best)
    counts = [(~np.isnan(m)).sum(axis=1) for m in (candidate, best)]
    both = (counts[0] > 0) & (counts[1] > 0)
    n = int(both.sum())
    if n == 0:
        return None
    if grid is None:
        return exact_mean(exact_task_deltas(candidate, best))
    deltas = scaled_deltas([grid_sums(m, grid) for m in (candidate, best)], counts, grid)
    total = sum(deltas.tolist() if isinstance(deltas, np.ndarray) else deltas)  # in Python ints: exact
    scale = math.lcm(*(int(c) for c in np.unique(np.concatenate([counts[0][both], counts[1][both]]))))
    return Fraction(total, scale * grid * n)


def exact_mean(deltas: Sequence[Fraction]) -> Fraction | None:
    return sum(deltas, Fraction(0)) / len(deltas) if deltas else None


def exact_spread(null_deltas: Sequence[float | Fraction | str]) -> Fraction | None:
    """The null controls' spread, max |Δ̄|, exactly, from the fractions their verdicts recorded."""
    exact = [abs(Fraction(d)) for d in null_deltas if not (isinstance(d, float) and math.isnan(d))]
    return max(exact, default=None)


def exceeds(delta: Fraction | None, spread: Fraction | None) -> bool:
    return spread is None or (delta is not None and delta > spread)


def exceeds_k_se(deltas: Sequence[Fraction], k: Fraction) -> bool | None:
    """Δ̄ > k·SE(d) on fractions: (k ≥ 0) iff Δ̄ > 0 and Δ̄²·n > k²·s², no square root. None when SE is 0
    or undefined (the caller falls back to Δ̄ > 0). A one-task gain has Δ̄ = SE exactly, a tie at k = 1
    that floats decided by the last bit (cap-evolve's issue #351)."""
    n = len(deltas)
    if n < 2:
        return None
    mean = sum(deltas, Fraction(0)) / n
    variance = sum(((d - mean) ** 2 for d in deltas), Fraction(0)) / (n - 1)
    if variance == 0:
        return None
    return mean > 0 and mean * mean * n > k * k * variance
