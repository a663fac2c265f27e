"""One arm's per-task numbers, computed once and shared by every comparison that reads them.

A gate session compares many candidates with one best, so :func:`summarize` keeps the last few arms keyed
by their matrix's bytes. Every number equals, bit for bit, what :mod:`.core` gives; the paired deltas and
the paired sign-flip test (:func:`sign_flip_test`, its counting in :mod:`.sign_flip`) read their arms here."""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

import numpy as np

from .core import as_matrix, check_rewards, task_stderrs
from .sign_flip import (
    SignFlipResult,
    _monte_carlo,
    grid_sums,
    reward_grid,
    scaled_deltas,
    sign_flip_on_integers,
)

CACHE_SIZE = 4  # the best, the candidate at hand, and room for a null control or two


class ArmSummary:
    """A reward matrix (a private read-only copy) and its per-task numbers; rewards outside [0, 1] raise."""

    def __init__(self, matrix: Sequence[Sequence[float]] | np.ndarray) -> None:
        matrix = as_matrix(matrix)  # a copy: nobody else holds it
        check_rewards(matrix)
        matrix.setflags(write=False)
        self.matrix = matrix
        self.valid = ~np.isnan(matrix)
        self.counts = np.sum(self.valid, axis=1)
        sums = np.sum(np.where(self.valid, matrix, 0.0), axis=1)  # np.nansum, without a 2nd isnan
        with np.errstate(invalid="ignore", divide="ignore"):
            self.means = np.where(self.counts > 0, sums / np.maximum(self.counts, 1), np.nan)
        self._int_sums: dict[int, np.ndarray] = {}
        self._passed: dict[float, np.ndarray] = {}

    def without(self, task: int) -> ArmSummary:
        """This arm with one task left out (every per-task number is row by row)."""
        keep = np.ones(self.means.size, dtype=bool)
        keep[task] = False
        other = ArmSummary.__new__(ArmSummary)
        other.matrix = self.matrix[keep]
        other.matrix.setflags(write=False)
        other.valid, other.counts, other.means = self.valid[keep], self.counts[keep], self.means[keep]
        other._int_sums = {grid: sums[keep] for grid, sums in self._int_sums.items()}
        other._passed = {threshold: passed[keep] for threshold, passed in self._passed.items()}
        return other

    @functools.cached_property
    def stderrs(self) -> np.ndarray:
        return task_stderrs(self.matrix)

    @functools.cached_property
    def values(self) -> np.ndarray:
        """The distinct valid rewards, sorted (what :func:`.sign_flip.reward_grid` reads)."""
        matrix = self.matrix
        if ((matrix == 0) | (matrix == 1) | ~self.valid).all():  # binary (the usual case): no sort
            return np.array([v for v in (0.0, 1.0) if (matrix == v).any()])
        return np.unique(matrix[self.valid])

    @functools.cached_property
    def means_or_none(self) -> list[float | None]:
        return none_for_nan(self.means)

    def int_sums(self, grid: int) -> np.ndarray:
        """Per-task sums scaled by ``grid`` to integers (missing trials add 0)."""
        if grid not in self._int_sums:
            self._int_sums[grid] = grid_sums(self.matrix, grid)
        return self._int_sums[grid]

    def passed(self, threshold: float) -> np.ndarray:
        """Tasks with at least half of their valid trials at or above ``threshold``, in integers (no valid
        trial: passed)."""
        if threshold not in self._passed:
            self._passed[threshold] = 2 * np.sum(self.matrix >= threshold, axis=1) >= self.counts
        return self._passed[threshold]


def none_for_nan(values: np.ndarray) -> list[float | None]:
    listed: list[float | None] = values.tolist()
    if not np.isnan(values).any():
        return listed
    return [None if v != v else v for v in listed]  # v != v: nan


_cache: list[tuple[tuple[int, ...], bytes, ArmSummary]] = []  # most recently used first
_cache_lock = threading.Lock()


def summarize(matrix: Sequence[Sequence[float]] | np.ndarray | ArmSummary) -> ArmSummary:
    if isinstance(matrix, ArmSummary):
        return matrix
    matrix = as_matrix(matrix)
    key = matrix.tobytes()
    with _cache_lock:
        for i, (shape, cached_key, summary) in enumerate(_cache):
            if shape == matrix.shape and cached_key == key:
                _cache.insert(0, _cache.pop(i))
                return summary
    summary = ArmSummary(matrix)
    with _cache_lock:
        _cache.insert(0, (matrix.shape, key, summary))
        del _cache[CACHE_SIZE:]
    return summary


def paired_means(candidate: ArmSummary, best: ArmSummary) -> tuple[np.ndarray, np.ndarray]:
    """Per-task deltas m_t(candidate) − m_t(best) over tasks valid on both sides, and their mask."""
    if candidate.means.shape != best.means.shape:
        raise ValueError("the two arms must cover the same tasks, in the same order")
    mask = ~np.isnan(candidate.means) & ~np.isnan(best.means)
    return candidate.means[mask] - best.means[mask], mask


def paired_deltas(candidate: np.ndarray, best: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return paired_means(ArmSummary(candidate), ArmSummary(best))


def integer_deltas_of(candidate: ArmSummary, best: ArmSummary, grid: int) -> np.ndarray | list[int]:
    """:func:`.sign_flip.integer_deltas` from two summaries (:func:`.sign_flip.scaled_deltas`)."""
    return scaled_deltas(
        [candidate.int_sums(grid), best.int_sums(grid)], [candidate.counts, best.counts], grid
    )


def sign_flip_test(
    candidate: np.ndarray | ArmSummary,
    best: np.ndarray | ArmSummary,
    *,
    n_resamples: int = 20000,
    seed: int = 0,
    alpha: float | None = None,
) -> SignFlipResult:
    """One-sided paired sign-flip test of H0: no improvement: on a reward grid exact (a float tail only when
    clearly away from ``alpha``), else seeded Monte Carlo with the +1 correction. Empty input → p = 1."""
    candidate, best = (arm if isinstance(arm, ArmSummary) else ArmSummary(arm) for arm in (candidate, best))
    grid = reward_grid(candidate.values, best.values)
    exact = None if grid is None else sign_flip_on_integers(integer_deltas_of(candidate, best, grid), alpha)
    if exact is None:
        deltas, _ = paired_means(candidate, best)
        return _monte_carlo(deltas, n_resamples, seed)
    return exact
