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


def exact_task_deltas(
    candidate: np.ndarray, best: np.ndarray, rows: Sequence[int] | None = None
) -> list[Fraction]:
    """m_t(candidate) − m_t(best) as fractions, over tasks valid on both sides, in task order
    (the same tasks and order as :func:`.sign_flip.paired_deltas`). ``rows``: only these tasks,
    their rewards read on the grid of the whole matrices (so they add up to the whole's Δ̄)."""
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
        sc, sb = (_grid_sums(m, grid)[both].tolist() for m in (candidate, best))
        return [Fraction(a * d - b * c, grid * c * d) for a, b, c, d in zip(sc, sb, nc, nb, strict=True)]
    fc, fb = (_float_sums(m[both]) for m in (candidate, best))
    return [a / c - b / d for a, b, c, d in zip(fc, fb, nc, nb, strict=True)]


def _grid_sums(matrix: np.ndarray, grid: int) -> np.ndarray:
    """Each task's sum of valid rewards in units of 1/``grid`` (integers)."""
    valid = ~np.isnan(matrix)
    sums: np.ndarray = np.where(valid, np.round(np.nan_to_num(matrix) * grid), 0).astype(np.int64).sum(axis=1)
    return sums


def _float_sums(matrix: np.ndarray) -> list[Fraction]:
    """Each task's sum of valid rewards, each float read as the rational it is exactly."""
    return [
        sum((Fraction(r) for r in row if r == r), Fraction(0)) for row in matrix.tolist()
    ]  # r == r: not nan


def exact_mean_delta(candidate: np.ndarray, best: np.ndarray) -> Fraction | None:
    """Δ̄ over tasks valid on both sides as one fraction (None when none is). On a grid it is one
    integer sum on the common scale G·lcm(trial counts), in numpy: 10,000 tasks cost what the
    float mean does; off a grid, :func:`exact_task_deltas` averaged."""
    candidate, best = as_matrix(candidate), as_matrix(best)
    grid = reward_grid(candidate, best)
    counts = [(~np.isnan(m)).sum(axis=1) for m in (candidate, best)]
    both = (counts[0] > 0) & (counts[1] > 0)
    n = int(both.sum())
    if n == 0:
        return None
    if grid is None:
        return exact_mean(exact_task_deltas(candidate, best))
    nc, nb = counts[0][both], counts[1][both]
    scale = math.lcm(*(int(c) for c in np.unique(np.concatenate([nc, nb]))))
    sc, sb = (_grid_sums(m, grid)[both] for m in (candidate, best))
    if scale * grid * int(max(sc.max(initial=0), sb.max(initial=0), 1)) * n < 2**62:
        total = int(np.sum(sc * (scale // nc)) - np.sum(sb * (scale // nb)))
    else:  # huge scales: the same sum in Python integers
        total = sum(
            int(a) * (scale // int(c)) - int(b) * (scale // int(d))
            for a, b, c, d in zip(sc, sb, nc, nb, strict=True)
        )
    return Fraction(total, scale * grid * n)


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


def exceeds_k_se(deltas: Sequence[Fraction], k: Fraction) -> bool | None:
    """cap-evolve's paired rule Δ̄ > k·SE(d), decided on fractions: SE = s/√n with s² the
    sample variance of the deltas, so (k ≥ 0) Δ̄ > k·SE iff Δ̄ > 0 and Δ̄²·n > k²·s² — no
    square root, no rounding. None when SE is 0 or undefined (n < 2, or every delta equal):
    the rule cannot tell noise from signal and its caller falls back to Δ̄ > 0.

    Why: a one-task gain (one d_t = g, the others 0) has Δ̄ = g/n and SE = g/n exactly, so at
    k = 1 it is a tie, which "strictly greater" rejects; in floats it was accepted at n = 10,
    11, 20, 30, 40 and rejected at n = 12, on the last bit (cap-evolve's issue #351)."""
    n = len(deltas)
    if n < 2:
        return None
    mean = sum(deltas, Fraction(0)) / n
    variance = sum(((d - mean) ** 2 for d in deltas), Fraction(0)) / (n - 1)
    if variance == 0:
        return None
    return mean > 0 and mean * mean * n > k * k * variance
