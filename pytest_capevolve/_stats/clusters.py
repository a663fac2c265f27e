"""The paired sign-flip test and interval when tasks come in clusters (several samples drawn from one
source document, one conversation, one repository).

Tasks of one cluster are not independent, so flipping each alone is anti-conservative; flipping whole
clusters' sums is exact whatever the dependence within them. The interval is cluster-robust: Δ̄ ±
t_{G−1}·SE_c. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .arms import paired_deltas
from .core import as_matrix
from .sign_flip import SignFlipResult, _monte_carlo, integer_deltas, reward_grid, sign_flip_on_integers


def _codes(clusters: Sequence[str], mask: np.ndarray) -> tuple[np.ndarray, int]:
    used = [str(c) for c, keep in zip(clusters, mask.tolist(), strict=True) if keep]
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(c, len(index)) for c in used], dtype=np.int64)
    return codes, len(index)


def cluster_sums(deltas: np.ndarray, codes: np.ndarray, groups: int) -> np.ndarray:
    sums = np.zeros(groups, dtype=deltas.dtype if deltas.dtype.kind == "i" else float)
    np.add.at(sums, codes, deltas)
    return sums


def cluster_sign_flip_test(
    candidate: np.ndarray,
    best: np.ndarray,
    clusters: Sequence[str],
    *,
    alpha: float | None = None,
    n_resamples: int = 20000,
    seed: int = 0,
) -> SignFlipResult:
    """One-sided paired sign-flip test of H0: no improvement, flipping whole clusters (``clusters``: each
    row's label). Tasks not valid on both sides leave their cluster; an emptied cluster drops out."""
    candidate, best = as_matrix(candidate), as_matrix(best)
    if len(clusters) != candidate.shape[0]:
        raise ValueError(f"{len(clusters)} cluster labels for {candidate.shape[0]} tasks; one per task")
    deltas, mask = paired_deltas(candidate, best)
    codes, groups = _codes(clusters, mask)
    grid = reward_grid(candidate, best)
    if grid is not None:
        ints = integer_deltas(candidate, best, grid)  # same order as the used tasks
        sums = [0] * groups
        for code, value in zip(codes.tolist(), ints, strict=True):
            sums[code] += value
        exact = sign_flip_on_integers(sums, alpha)
        if exact is not None:
            return exact
    return _monte_carlo(cluster_sums(deltas, codes, groups), n_resamples, seed)


def cluster_mean_ci(
    deltas: np.ndarray, clusters: Sequence[str]
) -> tuple[float | None, tuple[float, float] | None]:
    """The cluster-robust SE of the mean delta and its 95 % t interval on G − 1 df; (None, None) below two."""
    deltas = np.asarray(deltas, dtype=float)
    codes, groups = _codes(clusters, np.ones(len(clusters), dtype=bool))
    if groups < 2 or deltas.size == 0:
        return None, None
    mean = float(np.mean(deltas))
    sizes = np.bincount(codes, minlength=groups)
    residual = cluster_sums(deltas, codes, groups) - sizes * mean
    se = math.sqrt(groups / (groups - 1) * float(np.sum(residual**2))) / deltas.size
    from scipy.special import stdtrit

    q = float(stdtrit(groups - 1, 0.975))
    return se, (mean - q * se, mean + q * se)
