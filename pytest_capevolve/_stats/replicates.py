"""Error across whole runs: replicate blocks summarised by a t interval with R − 1 df.

A paired SE over tasks cannot see a shift moving every task of a run together (load, a cache, the time of
day); R independent blocks, each block's Δ̄ one observation, can."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr, stdtrit  # a fraction of scipy.stats's import time


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
