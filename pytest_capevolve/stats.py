"""Pure estimators and tests on numpy arrays. No I/O, no pytest, no run dir.

Conventions: a *reward matrix* is tasks × trials with ``nan`` for a missing trial (infra error
or not run). Per-task means are taken over valid trials only, so a missing trial is never a 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def as_matrix(rows: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """A float tasks × trials matrix; ragged rows are padded with nan (missing)."""
    if isinstance(rows, np.ndarray):
        matrix = rows.astype(float)
        return matrix.reshape(-1, 1) if matrix.ndim == 1 else matrix
    width = max((len(r) for r in rows), default=0)
    matrix = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        matrix[i, : len(row)] = row
    return matrix


def check_rewards(matrix: np.ndarray) -> None:
    """Raise ValueError on inf or values outside [0, 1] (nan means missing and is allowed)."""
    finite = matrix[~np.isnan(matrix)]
    if np.isinf(finite).any() or ((finite < 0) | (finite > 1)).any():
        bad = finite[np.isinf(finite) | (finite < 0) | (finite > 1)][0]
        raise ValueError(f"rewards must lie in [0, 1]; got {bad!r}")


def task_means(matrix: np.ndarray) -> np.ndarray:
    """Mean over the valid trials of each task; nan for a task with no valid trial."""
    matrix = as_matrix(matrix)
    check_rewards(matrix)
    counts = np.sum(~np.isnan(matrix), axis=1)
    sums = np.nansum(matrix, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def coverage(matrix: np.ndarray) -> float:
    """Share of tasks with at least one valid trial (0.0 for no tasks)."""
    matrix = as_matrix(matrix)
    if matrix.shape[0] == 0:
        return 0.0
    return float(np.mean(np.any(~np.isnan(matrix), axis=1)))


def mean_se(values: np.ndarray) -> tuple[float | None, float | None]:
    """Mean and its standard error sd(ddof=1)/√n over the non-nan values (None when empty;
    SE is None for a single value, where it is undefined)."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None, None
    mean = float(np.mean(values))
    if values.size < 2:
        return mean, None
    return mean, float(np.std(values, ddof=1) / math.sqrt(values.size))


def pass_hat_k(passes: np.ndarray, k: int) -> float | None:
    """pass^k: the chance that k fresh trials of a task all pass, averaged over tasks.

    ``passes`` is tasks × trials of 1/0 with nan for missing. Per task, with c passes out of
    n valid trials, the unbiased estimate is C(c, k) / C(n, k). Tasks with fewer than k valid
    trials cannot say anything about k and are left out; ``None`` when no task can.
    """
    return _per_task_k_estimate(passes, k, lambda n, c: math.comb(c, k) / math.comb(n, k))


def pass_at_k(passes: np.ndarray, k: int) -> float | None:
    """pass@k: the chance that at least one of k fresh trials passes, averaged over tasks.

    Unbiased per task: 1 − C(n − c, k) / C(n, k). ``None`` (never 0) when no task has k trials.
    """
    return _per_task_k_estimate(passes, k, lambda n, c: 1 - math.comb(n - c, k) / math.comb(n, k))


def _per_task_k_estimate(passes: np.ndarray, k: int, estimate: object) -> float | None:
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k}")
    matrix = as_matrix(passes)
    values = []
    for row in matrix:
        valid = row[~np.isnan(row)]
        n = int(valid.size)
        if n >= k:
            values.append(estimate(n, int(np.sum(valid >= 0.5))))  # type: ignore[operator]
    return float(np.mean(values)) if values else None
