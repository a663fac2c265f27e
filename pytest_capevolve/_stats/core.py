"""Pure estimators and tests on numpy arrays. No I/O, no pytest, no run dir.

Conventions: a *reward matrix* is tasks × trials with ``nan`` for a missing trial (infra error
or not run). Per-task means are taken over valid trials only, so a missing trial is never a 0.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist

import numpy as np

# scipy is imported where it is used (exact tails, the reference bootstrap): a session that only
# persists or resumes never pays its ~1 CPU-second import.
_NORMAL = NormalDist()


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
    if ((matrix >= 0) & (matrix <= 1)).all():  # the usual case: every reward present and valid
        return
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
    # floats, averaged the same way, as one estimate per task (10,000 tasks, a few dozen pairs)
    pairs, which = np.unique(np.stack([n[able], c[able]], axis=1), axis=0, return_inverse=True)
    estimates = np.array([estimate(int(pn), int(pc)) for pn, pc in pairs], dtype=float)
    return float(np.mean(estimates[which.reshape(-1)]))


# -- paired comparison ---------------------------------------------------------------------

GRID_MAX = 1000  # largest reward denominator treated as a grid (binary, rubric steps, ...)
EXACT_MARGIN = 1e-9  # a float p-value this close to alpha is re-decided with exact integers
# The exact tail is a distribution over every integer sum in ±Σ|d|; past this span it would take
# hundreds of MB (rewards on a fine grid with mixed trial counts: lcm(n_t)·grid per unit), so the
# p-value is seeded Monte Carlo instead, said in the verdict as p_method "monte_carlo".
EXACT_MAX_SPAN = 2**22


def paired_deltas(candidate: np.ndarray, best: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-task deltas m_t(candidate) − m_t(best) over tasks valid on both sides.

    Returns (deltas, mask) where ``mask`` marks the tasks used, in the input order.
    """
    cand_means, best_means = task_means(candidate), task_means(best)
    if cand_means.shape != best_means.shape:
        raise ValueError("the two arms must cover the same tasks, in the same order")
    mask = ~np.isnan(cand_means) & ~np.isnan(best_means)
    return cand_means[mask] - best_means[mask], mask


def reward_grid(*matrices: np.ndarray) -> int | None:
    """The smallest G ≤ GRID_MAX with every valid reward a multiple of 1/G, else None."""
    values = np.unique(np.concatenate([m[~np.isnan(m)].ravel() for m in matrices] or [np.empty(0)]))
    for grid in range(1, GRID_MAX + 1):
        scaled = values * grid
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9 * max(grid, 1)):
            return grid
    return None


def integer_deltas(candidate: np.ndarray, best: np.ndarray, grid: int) -> list[int]:
    """The paired deltas as exact integers on a common scale (same order as paired_deltas).

    Each per-task mean is (Σ integer rewards) / (n_t · grid); every mean is multiplied by
    L = grid · lcm(all n_t), which makes it an integer, so every comparison below is exact.
    """
    candidate, best = as_matrix(candidate), as_matrix(best)
    sums, counts = [], []
    for matrix in (candidate, best):
        valid = ~np.isnan(matrix)
        sums.append(np.where(valid, np.round(np.nan_to_num(matrix) * grid), 0).astype(np.int64).sum(axis=1))
        counts.append(valid.sum(axis=1))
    both = (counts[0] > 0) & (counts[1] > 0)
    if not np.any(both):
        return []
    ns = np.unique(np.concatenate([counts[0][both], counts[1][both]]))
    per_trial = math.lcm(*(int(n) for n in ns))
    if per_trial * grid * int(max(np.max(np.abs(sums[0])), np.max(np.abs(sums[1])), 1)) < 2**62:
        scaled = [sums[i][both] * (per_trial // counts[i][both]) for i in (0, 1)]
        return [int(d) for d in scaled[0] - scaled[1]]
    return [  # huge scales: the same arithmetic in Python integers
        int(sums[0][t]) * (per_trial // int(counts[0][t]))
        - int(sums[1][t]) * (per_trial // int(counts[1][t]))
        for t in np.flatnonzero(both)
    ]


def _count_at_least(abs_values: list[int], threshold: int) -> int:
    """How many of the 2^N sign patterns give Σ s_i·v_i ≥ threshold (exact, big integers).

    Σ s_i v_i = 2·P − T where P is the sum of the positively signed values, so this counts
    subsets with sum ≥ (T + threshold) / 2, by a subset-sum polynomial over equal values.
    """
    total = sum(abs_values)
    counts = np.zeros(total + 1, dtype=object)
    counts[0] = 1
    reach = 0
    for value, multiplicity in sorted(Counter(abs_values).items()):
        for _ in range(multiplicity):
            shifted = counts[: reach + 1].copy()
            counts[value : value + reach + 1] += shifted
            reach += value
    need = total + threshold
    start = max(0, -(-need // 2))  # ceil(need / 2)
    return int(sum(counts[start:])) if start <= total else 0


def _float_tail(abs_values: np.ndarray, observed: int) -> float:
    """P(Σ s_i v_i ≥ observed) under fair sign flips, in float: one binomial per distinct
    value, convolved by FFT on the integer grid of sums (fast; error far below 1e-9)."""
    from scipy import signal
    from scipy import stats as sps

    values, mult = np.unique(abs_values, return_counts=True)
    dist = np.array([1.0])  # index i ↔ sum (i − offset)
    offset = 0
    for value, m in zip(values.astype(np.int64), mult, strict=True):
        part = np.zeros(2 * int(value) * int(m) + 1)
        part[:: 2 * int(value)] = sps.binom.pmf(np.arange(m + 1), m, 0.5)
        dist = np.clip(signal.fftconvolve(dist, part), 0.0, None)
        offset += int(value) * int(m)
    first = max(0, int(observed) + offset)
    return float(min(1.0, np.sum(dist[first:]))) if first < dist.size else 0.0


@dataclass(frozen=True)
class SignFlipResult:
    p_value: float
    method: str  # "exact" or "monte_carlo"
    numerator: int  # p = numerator / denominator, exactly
    denominator: int

    def at_most(self, alpha: float | Fraction) -> bool:
        """p ≤ alpha, decided on integers (a float alpha is read from its decimal text; a
        Fraction, e.g. a Holm level α/k, is used exactly)."""
        level = alpha if isinstance(alpha, Fraction) else Fraction(str(alpha))
        return self.numerator * level.denominator <= level.numerator * self.denominator

    @property
    def fraction(self) -> Fraction:
        return Fraction(self.numerator, self.denominator)


def sign_flip_test(
    candidate: np.ndarray,
    best: np.ndarray,
    *,
    n_resamples: int = 20000,
    seed: int = 0,
    alpha: float | None = None,
) -> SignFlipResult:
    """One-sided paired sign-flip (permutation) test of H0: no improvement.

    On a reward grid the deltas are scaled to integers and p = #{patterns with Σ ≥ observed}
    / 2^N is computed exactly (a fast float path is used only when it is clearly away from
    ``alpha``; near it, exact big-integer counting decides). Off a grid, or on one so fine that
    the integer sums span more than :data:`EXACT_MAX_SPAN`, seeded Monte Carlo sign flips with
    the +1 correction (``method`` says which). Empty input → p = 1.
    """
    candidate, best = as_matrix(candidate), as_matrix(best)
    grid = reward_grid(candidate, best)
    if grid is None:
        deltas, _ = paired_deltas(candidate, best)
        return _monte_carlo(deltas, n_resamples, seed)
    exact = sign_flip_on_integers(integer_deltas(candidate, best, grid), alpha)
    if exact is None:
        deltas, _ = paired_deltas(candidate, best)
        return _monte_carlo(deltas, n_resamples, seed)
    return exact


def sign_flip_on_integers(
    deltas: np.ndarray | list[int], alpha: float | None = None
) -> SignFlipResult | None:
    """The exact one-sided sign-flip p-value of integer paired deltas (zeros carry no sign and
    are dropped): a float tail by FFT when it is clearly away from ``alpha``, else big-integer
    counting. ``deltas``: an int64 array (whose sums cannot overflow) or Python integers.
    None when Σ|d| is past :data:`EXACT_MAX_SPAN` (the caller falls back to Monte Carlo)."""
    if isinstance(deltas, np.ndarray):
        nonzero = deltas[deltas != 0]
        abs_array = np.abs(nonzero)
        n = int(nonzero.size)
        fits = n == 0 or int(abs_array.max()) * n < 2**63  # int64 sums are exact
        observed = int(np.sum(nonzero)) if fits else sum(nonzero.tolist())
        span = int(np.sum(abs_array)) if fits else sum(abs_array.tolist())
    else:  # Python integers past int64 become an object array, exact all the same
        ints = [d for d in deltas if d != 0]
        abs_array = np.array([abs(d) for d in ints])
        n = len(ints)
        observed = sum(ints)
        span = sum(abs(d) for d in ints)
    if n == 0:
        return SignFlipResult(1.0, "exact", 1, 1)
    if n > 16 and span > EXACT_MAX_SPAN:  # (up to 16 deltas are counted exactly, as before)
        return None
    if n > 60:
        approx = _float_tail(abs_array, observed)
        if alpha is None or abs(approx - alpha) > EXACT_MARGIN:
            # far from the decision boundary: the float tail decides the same way as exact counts
            denominator = 1 << 53
            return SignFlipResult(approx, "exact", round(approx * denominator), denominator)
    count = _count_at_least(abs_array.tolist(), observed)
    return SignFlipResult(count / 2**n, "exact", count, 2**n)


def _monte_carlo(deltas: np.ndarray, n_resamples: int, seed: int) -> SignFlipResult:
    deltas = deltas[deltas != 0]
    if deltas.size == 0:
        return SignFlipResult(1.0, "exact", 1, 1)
    observed = float(np.sum(deltas))
    magnitude = np.abs(deltas)
    tolerance = 1e-12 * float(np.sum(magnitude))  # ties count against the candidate
    if deltas.size <= 16:
        patterns = ((np.arange(2**deltas.size)[:, None] >> np.arange(deltas.size)) & 1) * 2 - 1
        sums = patterns @ magnitude
        count = int(np.sum(sums >= observed - tolerance))
        return SignFlipResult(count / 2**deltas.size, "exact", count, 2**deltas.size)
    rng = np.random.default_rng(seed)
    count = 0
    for start in range(0, n_resamples, 2000):
        size = min(2000, n_resamples - start)
        signs = rng.integers(0, 2, size=(size, deltas.size), dtype=np.int8) * 2 - 1
        count += int(np.sum(signs @ magnitude >= observed - tolerance))
    return SignFlipResult((count + 1) / (n_resamples + 1), "monte_carlo", count + 1, n_resamples + 1)


# Past this many tasks the mean's sampling distribution is normal to well within the bootstrap's
# own Monte Carlo error, so the interval is analytic (and said so in the verdict): resampling
# 10,000 tasks 2,000 times per candidate costs seconds and adds nothing.
ANALYTIC_CI_MIN_TASKS = 2000
BCA = "bca_bootstrap"
NORMAL = "normal"


def ci_method(n: int) -> str:
    """Which interval :func:`bootstrap_ci` gives for ``n`` deltas."""
    return NORMAL if n > ANALYTIC_CI_MIN_TASKS else BCA


def bootstrap_ci(
    deltas: np.ndarray, *, confidence: float = 0.95, seed: int = 0, n_resamples: int = 2000
) -> tuple[float, float] | None:
    """Interval of the mean delta (for reporting, not for deciding): the paired BCa bootstrap
    up to :data:`ANALYTIC_CI_MIN_TASKS` deltas, the normal interval Δ̄ ± z·SE past it
    (:func:`ci_method` names which).

    The bootstrap is :func:`scipy.stats.bootstrap`'s (``method="BCa"``, the same draws from
    ``default_rng(seed)``; :func:`reference_bootstrap_ci` calls scipy and a property test keeps
    the two equal), computed in numpy with the jackknife of the mean in closed form, and one
    resampling matrix per (n, seed) shared by every candidate gated against the same tasks.
    None when fewer than two deltas; a degenerate [d, d] when every delta is equal.
    """
    deltas = np.asarray(deltas, dtype=float)
    n = deltas.size
    if n < 2:
        return None
    if np.all(deltas == deltas[0]):
        return (float(deltas[0]), float(deltas[0]))
    if ci_method(n) == NORMAL:
        return normal_ci(deltas, confidence=confidence)
    theta_hat = np.mean(deltas)
    theta_b = np.mean(deltas[_resampling_matrix(n, n_resamples, seed)], axis=-1)
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


def normal_ci(deltas: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    """Δ̄ ± z·SE: the analytic interval of the mean delta for large n."""
    mean, se = mean_se(np.asarray(deltas, dtype=float))
    assert mean is not None and se is not None
    z = _ndtri(0.5 + confidence / 2)
    return mean - z * se, mean + z * se


def _ndtri(p: float) -> float:
    """The standard normal quantile, ±inf at 0 and 1 (as scipy's ``ndtri``)."""
    if p <= 0 or p >= 1:
        return -math.inf if p <= 0 else math.inf
    return _NORMAL.inv_cdf(float(p))


def _ndtr(x: float) -> float:
    return float("nan") if math.isnan(x) else _NORMAL.cdf(x)


@functools.lru_cache(maxsize=2)
def _resampling_matrix(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """The bootstrap's task indices, drawn as scipy draws them; read-only and cached, so the
    candidates of one gate session (same tasks, same seed) share one matrix."""
    matrix = np.random.default_rng(seed).integers(0, n, (n_resamples, n))
    matrix.setflags(write=False)
    return matrix


def reference_bootstrap_ci(
    deltas: np.ndarray, *, confidence: float = 0.95, seed: int = 0, n_resamples: int = 2000
) -> tuple[float, float] | None:
    """The BCa interval straight from :func:`scipy.stats.bootstrap` (slow: the reference the
    property tests hold :func:`bootstrap_ci` to)."""
    from scipy import stats as sps

    deltas = np.asarray(deltas, dtype=float)
    if deltas.size < 2:
        return None
    if np.all(deltas == deltas[0]):
        return (float(deltas[0]), float(deltas[0]))
    for method in ("BCa", "percentile"):
        result = sps.bootstrap(
            (deltas,),
            np.mean,
            confidence_level=confidence,
            n_resamples=n_resamples,
            method=method,
            rng=np.random.default_rng(seed),
        )
        low, high = result.confidence_interval
        if not (np.isnan(low) or np.isnan(high)):
            break
    return float(low), float(high)


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
    """cap-evolve's combined SE of an arm's mean: between-task variance / n plus the mean of
    the per-task squared SEs / n (kept only so its `significant` mode reproduces)."""
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
    """One-way random-effects split of an arm's rewards, for planning.

    W: mean within-task (trial-to-trial) variance; omega2: between-task variance of the true
    task rates (method of moments, floored at 0); icc = omega2 / (omega2 + W).
    """
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
