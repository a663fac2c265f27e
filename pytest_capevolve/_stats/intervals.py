"""The interval of the mean delta, for reporting (never for deciding): Student's t below
:data:`T_CI_MAX_TASKS` tasks, the paired BCa bootstrap up to :data:`ANALYTIC_CI_MIN_TASKS`, the normal
interval past it (:func:`mean_ci` picks, :func:`mean_ci_method` names which); scipy's own bootstrap, its
reference, is in tests/unit/test_ci_properties.py. Error across whole runs: replicate blocks, each block's
Δ̄ one observation, summarised by a t interval with R − 1 df (a paired SE over tasks cannot see a shift
moving every task of a run together: load, a cache, the time of day)."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .core import mean_se

# scipy is imported where it is used: a session that only persists or resumes never pays its ~1 CPU-s import
_NORMAL = NormalDist()

# Past this many tasks the mean's sampling distribution is normal to well within the bootstrap's
# own Monte Carlo error, so the interval is analytic (and said so in the verdict): resampling
# 10,000 tasks 2,000 times per candidate costs seconds and adds nothing.
ANALYTIC_CI_MIN_TASKS = 2000
BCA = "bca_bootstrap"
NORMAL = "normal"
STUDENT_T = "t"
# Below this many tasks the bootstrap under-covers (a spread ~(n−1)/n too small, no tail heavier than the
# normal): its "95 %" interval of tau2-like null deltas covers 86 % at 12 tasks, 91 % at 30, Student's t
# 95–96 % (tests/unit/test_interval_coverage.py). From 200 tasks on the two agree within Monte Carlo error.
T_CI_MAX_TASKS = 200


def ci_method(n: int) -> str:
    return NORMAL if n > ANALYTIC_CI_MIN_TASKS else BCA


def bootstrap_ci(
    deltas: np.ndarray, *, confidence: float = 0.95, seed: int = 0, n_resamples: int = 2000
) -> tuple[float, float] | None:
    """Interval of the mean delta: the paired BCa bootstrap up to :data:`ANALYTIC_CI_MIN_TASKS` deltas, the
    normal interval past it. The bootstrap is scipy's (same draws; a property test holds it to
    the tests' scipy reference) computed in numpy, with one resampling matrix per (n, seed). None below
    two deltas; [d, d] when all are equal."""
    deltas = np.asarray(deltas, dtype=float)
    n = deltas.size
    if n < 2:
        return None
    if np.all(deltas == deltas[0]):
        return (float(deltas[0]), float(deltas[0]))
    if ci_method(n) == NORMAL:
        return normal_ci(deltas, confidence=confidence)
    theta_hat = np.mean(deltas)
    theta_b = _resampled_means(deltas, n_resamples, seed)
    alpha = (1 - confidence) / 2
    below = (np.count_nonzero(theta_b < theta_hat) + np.count_nonzero(theta_b <= theta_hat)) / (
        2 * n_resamples
    )
    z0 = np.float64(_ndtri(below))  # numpy floats: ±inf and nan flow on as in scipy
    jackknife = (np.sum(deltas) - deltas) / (n - 1)  # the mean with each task left out
    u = (n - 1) * (np.mean(jackknife) - jackknife)
    levels = []
    with np.errstate(all="ignore"):  # an acceleration of 0/0 (tiny deltas) is nan: percentile
        a_hat = 1 / 6 * (np.sum(u**3) / n**3) / (np.sum(u**2) / n**2) ** 1.5
        for z in (_ndtri(alpha), -_ndtri(alpha)):
            num = z0 + z
            levels.append(_ndtr(float(z0 + num / (1 - a_hat * num))))
    if np.any(np.isnan(levels)):  # BCa undefined (every resample on one side): percentile
        levels = [alpha, 1 - alpha]
    low, high = np.quantile(theta_b, levels)
    return float(low), float(high)


def mean_ci_method(n: int) -> str:
    return STUDENT_T if n < T_CI_MAX_TASKS else ci_method(n)


def mean_ci(deltas: np.ndarray, *, seed: int = 0) -> tuple[float, float] | None:
    """The 95 % interval a verdict reports: :func:`t_ci` below :data:`T_CI_MAX_TASKS` deltas,
    :func:`bootstrap_ci` from there. None below two deltas; [d, d] when all are equal."""
    deltas = np.asarray(deltas, dtype=float)
    if mean_ci_method(deltas.size) == STUDENT_T:
        return t_ci(deltas)
    return bootstrap_ci(deltas, seed=seed)


def t_ci(deltas: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float] | None:
    deltas = np.asarray(deltas, dtype=float)
    if deltas.size < 2:
        return None
    if np.all(deltas == deltas[0]):
        return (float(deltas[0]), float(deltas[0]))
    from scipy.special import stdtrit  # the t quantile; scipy.special imports in a fraction of stats

    mean, se = mean_se(deltas)
    assert mean is not None and se is not None
    q = float(stdtrit(deltas.size - 1, 0.5 + confidence / 2))
    return mean - q * se, mean + q * se


def normal_ci(deltas: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    mean, se = mean_se(np.asarray(deltas, dtype=float))
    assert mean is not None and se is not None
    z = _ndtri(0.5 + confidence / 2)
    return mean - z * se, mean + z * se


def detection_z(alpha: float, power: float) -> float:
    """z_{1−α} + z_{power}: how many SEs a true mean delta must be for a one-sided test to detect it."""
    return _ndtri(1 - alpha) + _ndtri(power)


def _ndtri(p: float) -> float:
    if p <= 0 or p >= 1:
        return -math.inf if p <= 0 else math.inf
    return _NORMAL.inv_cdf(float(p))


def _ndtr(x: float) -> float:
    return float("nan") if math.isnan(x) else _NORMAL.cdf(x)


# Rows of resamples drawn or averaged at a time: a few MB of int64 draws or float copies, where
# the whole (n_resamples × n) of either is 32 MB at 2,000 tasks — drawn at the end of a session
# for the dashboard's curve, it was most of the session's peak memory.
_CHUNK_CELLS = 1 << 18
# A resampling matrix up to this many cells (4 MB in uint16: 2,000 resamples of 1,000 tasks) is
# kept for the next candidate of the same gate; a larger one is drawn again each time (56 ms at
# 2,000 tasks) rather than held to the session's end.
_HELD_CELLS = 1 << 21


def _resampled_means(deltas: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Each resample's mean, a block of rows at a time (no copy of the whole)."""
    means = np.empty(n_resamples)
    if n_resamples * deltas.size <= _HELD_CELLS:
        matrix = _resampling_matrix(deltas.size, n_resamples, seed)
        blocks: Iterator[tuple[int, np.ndarray]] = (
            (start, matrix[start:stop]) for start, stop in _blocks(deltas.size, n_resamples)
        )
    else:  # the same stream, a block of rows at a time, never held
        blocks = _draws(deltas.size, n_resamples, seed)
    for start, rows in blocks:
        means[start : start + len(rows)] = np.mean(deltas[rows], axis=-1)
    return means


def _blocks(n: int, n_resamples: int) -> Iterator[tuple[int, int]]:
    step = max(1, _CHUNK_CELLS // max(n, 1))
    return ((start, min(start + step, n_resamples)) for start in range(0, n_resamples, step))


def _draws(n: int, n_resamples: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """The bootstrap's task indices, drawn as scipy draws them, a block of rows at a time."""
    rng = np.random.default_rng(seed)
    return ((start, rng.integers(0, n, (stop - start, n))) for start, stop in _blocks(n, n_resamples))


@functools.lru_cache(maxsize=2)
def _resampling_matrix(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """:func:`_draws` in the smallest unsigned type that fits; read-only and cached, so one gate session's
    candidates share it."""
    matrix = np.empty((n_resamples, n), dtype=np.min_scalar_type(max(n - 1, 0)))
    for start, rows in _draws(n, n_resamples, seed):
        matrix[start : start + len(rows)] = rows
    matrix.setflags(write=False)
    return matrix


@dataclass(frozen=True)
class ReplicateSummary:
    """``agreeing``: blocks whose Δ̄ has the across-block mean's sign (0 when the mean is 0); ``agree``:
    all share one non-zero sign."""

    blocks: int
    mean: float
    sd: float | None  # block-to-block SD of Δ̄ (ddof=1): one run's error, seen from outside
    se: float | None  # sd / √R; None for one block
    df: int
    ci: tuple[float, float] | None  # two-sided, t with R − 1 df
    p_value: float | None  # two-sided one-sample t test of mean 0
    positive: int
    negative: int
    agreeing: int
    agree: bool

    @property
    def ci_excludes_zero(self) -> bool:
        return self.ci is not None and (self.ci[0] > 0 or self.ci[1] < 0)


def replicate_summary(block_deltas: Sequence[float] | np.ndarray, level: float = 0.95) -> ReplicateSummary:
    from scipy.special import stdtr, stdtrit

    values = np.asarray(block_deltas, dtype=float)
    if values.ndim != 1 or values.size == 0 or not np.all(np.isfinite(values)):
        raise ValueError("replicate_summary needs one finite Δ̄ per block, at least one block")
    r = int(values.size)
    mean = float(np.mean(values))
    positive, negative = int(np.sum(values > 0)), int(np.sum(values < 0))
    agreeing = positive if mean > 0 else negative if mean < 0 else 0
    agree = positive == r or negative == r
    if r < 2:
        return ReplicateSummary(r, mean, None, None, 0, None, None, positive, negative, agreeing, agree)
    sd = float(np.std(values, ddof=1))
    se = sd / math.sqrt(r)
    df = r - 1
    if se == 0.0:  # every block gave the same Δ̄: no spread to put an interval on
        ci = (mean, mean)
        p = 1.0 if mean == 0.0 else 0.0
    else:
        half = float(stdtrit(df, 0.5 + level / 2)) * se
        ci = (mean - half, mean + half)
        p = float(2 * stdtr(df, -abs(mean) / se))
    return ReplicateSummary(r, mean, sd, se, df, ci, p, positive, negative, agreeing, agree)
