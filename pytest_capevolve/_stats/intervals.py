"""The interval of the mean delta, for reporting (never for deciding): Student's t at every n
(:func:`t_ci`; ``ci_method: "t"``). Error across whole runs: replicate blocks, each block's Δ̄ one
observation, summarised by a t interval with R − 1 df (a paired SE over tasks cannot see a shift
moving every task of a run together: load, a cache, the time of day)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .core import mean_se

# scipy is imported where it is used: a session that only persists or resumes never pays its ~1 CPU-s import
_NORMAL = NormalDist()

# The interval's name in a verdict (``ci_method``). At 12 tasks (the public tau2 val) the BCa bootstrap
# this replaced covered 86 % of "95 %", t 95–96 %; from 200 tasks on the two agreed within Monte Carlo
# error (tests/unit/test_interval_coverage.py measures t's coverage at 12 to 300 tasks).
STUDENT_T = "t"


def t_ci(deltas: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float] | None:
    """The 95 % interval a verdict reports: Δ̄ ± t(n − 1)·SE. None below two deltas; [d, d] when all
    are equal."""
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


def detection_z(alpha: float, power: float) -> float:
    """z_{1−α} + z_{power}: how many SEs a true mean delta must be for a one-sided test to detect it."""
    return _ndtri(1 - alpha) + _ndtri(power)


def _ndtri(p: float) -> float:
    if p <= 0 or p >= 1:
        return -math.inf if p <= 0 else math.inf
    return _NORMAL.inv_cdf(float(p))


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
