"""The mean paired delta as an exact rational, for comparisons no float rounding may decide.

Two arrangements of the same rewards give the same Δ̄ as fractions but can differ in the last
bit as floats (``np.mean`` sums in a different order), so "Δ̄ exceeds the null controls' own
spread" must be decided on fractions: with a candidate at Δ̄ = 7/18 and a null at 7/18, floats
accept it one way round and reject it the other.

Rewards on a grid (every reward a multiple of 1/G, G ≤ :data:`.sign_flip.GRID_MAX`) are read as
the fractions k/G they stand for; off a grid each float is read as the rational it is exactly.
Pure, on numpy arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from .core import as_matrix
from .sign_flip import reward_grid


def exact_task_deltas(candidate: np.ndarray, best: np.ndarray) -> list[Fraction]:
    """m_t(candidate) − m_t(best) as fractions, over tasks valid on both sides, in task order
    (the same tasks and order as :func:`.sign_flip.paired_deltas`)."""
    candidate, best = as_matrix(candidate), as_matrix(best)
    grid = reward_grid(candidate, best)
    counts = [(~np.isnan(m)).sum(axis=1) for m in (candidate, best)]
    both = np.flatnonzero((counts[0] > 0) & (counts[1] > 0))
    nc, nb = (c[both].tolist() for c in counts)
    if grid is not None:  # integer sums: one fraction per task, (s_c·n_b − s_b·n_c) / (G·n_c·n_b)
        sc, sb = (_grid_sums(m, grid)[both].tolist() for m in (candidate, best))
        return [Fraction(a * d - b * c, grid * c * d) for a, b, c, d in zip(sc, sb, nc, nb, strict=True)]
    fc, fb = (_float_sums(m[both]) for m in (candidate, best))
    return [a / c - b / d for a, b, c, d in zip(fc, fb, nc, nb, strict=True)]


def _grid_sums(matrix: np.ndarray, grid: int) -> np.ndarray:
    """Each task's sum of valid rewards in units of 1/``grid`` (integers)."""
    valid = ~np.isnan(matrix)
    return np.where(valid, np.round(np.nan_to_num(matrix) * grid), 0).astype(np.int64).sum(axis=1)


def _float_sums(matrix: np.ndarray) -> list[Fraction]:
    """Each task's sum of valid rewards, each float read as the rational it is exactly."""
    return [
        sum((Fraction(r) for r in row if r == r), Fraction(0)) for row in matrix.tolist()
    ]  # r == r: not nan


def exact_mean(deltas: Sequence[Fraction]) -> Fraction | None:
    """The mean of exact deltas (None when there are none)."""
    return sum(deltas, Fraction(0)) / len(deltas) if deltas else None


def exact_spread(null_deltas: Sequence[float | Fraction | str]) -> Fraction | None:
    """The null controls' own spread, max |Δ̄|, exactly: each null's Δ̄ as the fraction its
    verdict recorded (a float, from an older verdict, as the rational it is)."""
    exact = [abs(Fraction(d)) for d in null_deltas if not (isinstance(d, float) and math.isnan(d))]
    return max(exact, default=None)


def exceeds(delta: Fraction | None, spread: Fraction | None) -> bool:
    """Does Δ̄ exceed the null floor? Decided on fractions: an exact tie never exceeds."""
    return spread is None or (delta is not None and delta > spread)
