"""Pure estimators and tests on numpy arrays. No I/O, no pytest, no run dir.

A *reward matrix* is tasks × trials with ``nan`` for a missing trial: a missing trial is never a 0."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def as_matrix(rows: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    if isinstance(rows, np.ndarray):
        matrix = rows.astype(float)
        return matrix.reshape(-1, 1) if matrix.ndim == 1 else matrix
    width = max((len(r) for r in rows), default=0)
    matrix = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        matrix[i, : len(row)] = row
    return matrix


def check_rewards(matrix: np.ndarray) -> None:
    if ((matrix >= 0) & (matrix <= 1)).all():  # the usual case: every reward present and valid
        return
    finite = matrix[~np.isnan(matrix)]
    if np.isinf(finite).any() or ((finite < 0) | (finite > 1)).any():
        bad = finite[np.isinf(finite) | (finite < 0) | (finite > 1)][0]
        raise ValueError(f"rewards must lie in [0, 1]; got {bad!r}")


def task_means(matrix: np.ndarray) -> np.ndarray:
    matrix = as_matrix(matrix)
    check_rewards(matrix)
    counts = np.sum(~np.isnan(matrix), axis=1)
    sums = np.nansum(matrix, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def coverage(matrix: np.ndarray) -> float:
    matrix = as_matrix(matrix)
    if matrix.shape[0] == 0:
        return 0.0
    return float(np.mean(np.any(~np.isnan(matrix), axis=1)))


def mean_se(values: np.ndarray) -> tuple[float | None, float | None]:
    """Mean and SE sd(ddof=1)/√n of the non-nan values (None when empty; SE None for one value)."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None, None
    mean = float(np.mean(values))
    if values.size < 2:
        return mean, None
    return mean, float(np.std(values, ddof=1) / math.sqrt(values.size))


def pass_hat_k(passes: np.ndarray, k: int) -> float | None:
    """pass^k: the chance that k fresh trials of a task all pass, averaged over tasks: C(c, k) / C(n, k)
    per task (``passes``: 1/0/nan). Tasks with fewer than k valid trials are left out; None when none is
    left."""
    return _per_task_k_estimate(passes, k, lambda n, c: math.comb(c, k) / math.comb(n, k))


def pass_at_k(passes: np.ndarray, k: int) -> float | None:
    """pass@k averaged over tasks: 1 − C(n − c, k) / C(n, k) per task; None (never 0) when no task has k
    trials."""
    return _per_task_k_estimate(passes, k, lambda n, c: 1 - math.comb(n - c, k) / math.comb(n, k))


def _per_task_k_estimate(passes: np.ndarray, k: int, estimate: Callable[[int, int], float]) -> float | None:
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k}")
    matrix = as_matrix(passes)
    seen = ~np.isnan(matrix)
    n = np.count_nonzero(seen, axis=1)
    c = np.count_nonzero(seen & (np.where(seen, matrix, 0.0) >= 0.5), axis=1)
    able = n >= k
    if not able.any():
        return None
    # the estimate of each distinct (n, c) once, then the tasks' values in task order: the same
    # floats, averaged the same way, as one estimate per task (10,000 tasks, a few dozen pairs);
    # each pair one integer (c ≤ n < base), whose order is the pairs' (not np.unique(axis=0): a
    # sort of row views, ~15 ms at 10,000 tasks)
    base = int(matrix.shape[1]) + 1
    keys, which = np.unique(n[able] * base + c[able], return_inverse=True)
    estimates = np.array([estimate(int(key) // base, int(key) % base) for key in keys], dtype=float)
    return float(np.mean(estimates[which.reshape(-1)]))


def task_stderrs(matrix: np.ndarray) -> np.ndarray:
    """Per-task standard error over valid trials (0 for a single trial, nan for none)."""
    matrix = as_matrix(matrix)
    counts = np.sum(~np.isnan(matrix), axis=1)
    out = np.full(matrix.shape[0], np.nan)
    out[counts == 1] = 0.0
    many = counts > 1
    if np.any(many):
        out[many] = np.nanstd(matrix[many], axis=1, ddof=1) / np.sqrt(counts[many])
    return out


def combined_se(matrix: np.ndarray) -> float:
    """cap-evolve's combined SE of an arm's mean (kept so its ``significant`` mode reproduces)."""
    means = task_means(matrix)
    ses = task_stderrs(matrix)
    valid = ~np.isnan(means)
    means, ses = means[valid], ses[valid]
    n = means.size
    if n == 0:
        return 0.0
    between = float(np.var(means, ddof=1)) / n if n >= 2 else 0.0
    within = float(np.sum(ses**2)) / (n * n)
    return math.sqrt(between + within)


def variance_components(matrix: np.ndarray) -> dict[str, float | None]:
    """One-way random-effects split of an arm's rewards, for planning: W within-task variance, omega2
    between-task variance (moments, floored at 0), icc = omega2 / (omega2 + W)."""
    matrix = as_matrix(matrix)
    rows = [row[~np.isnan(row)] for row in matrix]
    rows = [r for r in rows if r.size >= 2]
    if len(rows) < 2:
        return {"within": None, "between": None, "icc": None}
    within = float(np.mean([np.var(r, ddof=1) for r in rows]))
    mean_trials = float(np.mean([r.size for r in rows]))
    between = max(0.0, float(np.var([np.mean(r) for r in rows], ddof=1)) - within / mean_trials)
    total = between + within
    return {"within": within, "between": between, "icc": between / total if total > 0 else None}
