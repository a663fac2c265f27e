"""The paired sign-flip test on per-task deltas: exact on a reward grid, else Monte Carlo.

Every result names how its p was reached (:data:`METHODS`), and none is 0 (the observed pattern counts):
``exact`` counts patterns in Python integers (100 tasks all improved is p = 1/2^100, not 0); ``float_tail``,
past 60 deltas with p far from α, is an FFT tail whose fraction is an upper bound; ``*_coarsened``, past
:data:`EXACT_MAX_SPAN`, is the same test on deltas rounded to ``coarsening`` units (an odd function of each
delta, so still exact); ``monte_carlo``, off a grid past 16 deltas, is seeded sign flips with the +1.
Beside it: the mean paired delta as an exact rational (no float rounding decides "Δ̄ exceeds the nulls'
spread"), and the test's resolution, the fewest improved tasks ("k better, none worse", p = 2^-k) it can
accept at a level."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .core import as_matrix

# numpy only: the exact tail's one inverse FFT is numpy's (importing scipy.signal costs ~1 CPU-s)
GRID_MAX = 1000  # largest reward denominator treated as a grid (binary, rubric steps, ...)
EXACT_MARGIN = 1e-9  # a float p-value this close to alpha is re-decided with exact integers
# The exact tail is a distribution over every integer sum in ±Σ|d|; past this span it would take
# hundreds of MB (a fine grid with mixed trial counts: lcm(n_t)·grid per unit), so the deltas are coarsened.
EXACT_MAX_SPAN = 2**22


def reward_grid(*matrices: np.ndarray) -> int | None:
    """The smallest G ≤ GRID_MAX with every valid reward a multiple of 1/G, else None."""
    values = np.unique(np.concatenate([m[~np.isnan(m)].ravel() for m in matrices] or [np.empty(0)]))
    for grid in range(1, GRID_MAX + 1):
        scaled = values * grid
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9 * max(grid, 1)):
            return grid
    return None


def integer_deltas(candidate: np.ndarray, best: np.ndarray, grid: int) -> list[int]:
    """The paired deltas as exact integers: every per-task mean times grid · lcm(all n_t)."""
    matrices = as_matrix(candidate), as_matrix(best)
    counts = [(~np.isnan(m)).sum(axis=1) for m in matrices]
    return [int(d) for d in scaled_deltas([grid_sums(m, grid) for m in matrices], counts, grid)]


def grid_sums(matrix: np.ndarray, grid: int) -> np.ndarray:
    """Per-task sums of the rewards scaled by ``grid`` to integers (missing trials add 0)."""
    scaled = np.where(~np.isnan(matrix), np.round(np.nan_to_num(matrix) * grid), 0)
    sums: np.ndarray = scaled.astype(np.int64).sum(axis=1)
    return sums


def scaled_deltas(sums: list[np.ndarray], counts: list[np.ndarray], grid: int) -> np.ndarray | list[int]:
    """The integer deltas of (candidate, best) per-task grid ``sums`` over ``counts`` valid trials, tasks
    valid on both sides: int64, or Python ints where int64 could overflow."""
    both = (counts[0] > 0) & (counts[1] > 0)
    if not np.any(both):
        return np.zeros(0, dtype=np.int64)
    ns = np.unique(np.concatenate([counts[0][both], counts[1][both]]))
    per_trial = math.lcm(*(int(n) for n in ns))
    if per_trial * grid * int(max(np.max(np.abs(sums[0])), np.max(np.abs(sums[1])), 1)) < 2**62:
        scaled = [sums[i][both] * (per_trial // counts[i][both]) for i in (0, 1)]
        difference: np.ndarray = scaled[0] - scaled[1]
        return difference
    return [  # huge scales: the same arithmetic in Python integers
        int(sums[0][t]) * (per_trial // int(counts[0][t]))
        - int(sums[1][t]) * (per_trial // int(counts[1][t]))
        for t in np.flatnonzero(both)
    ]


def _count_at_least(abs_values: list[int], threshold: int) -> int:
    """How many of the 2^N sign patterns give Σ s_i·v_i ≥ threshold (exact): Σ s_i v_i = 2·P − T, so count
    subsets with sum ≥ (T + threshold) / 2 by a subset-sum polynomial."""
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
    """P(Σ s_i v_i ≥ observed) under fair sign flips, in float (error far below 1e-9).

    P, the sum of the positively signed values, has generating function Π_v ((1 + x^v) / 2)^m_v; on the
    unit circle each factor is a linear phase times cos(πkv/N), so the product is taken in closed form and
    one inverse FFT gives the distribution. A frequency whose product is below :data:`_NEGLIGIBLE` / N is
    dropped (later factors only shrink it)."""
    values, mult = np.unique(np.asarray(abs_values, dtype=np.int64), return_counts=True)
    common = math.gcd(*(int(v) for v in values))  # S lives on multiples of it: a shorter grid
    values = values // common
    observed = -(-int(observed) // common)  # S ≥ obs ⇔ S/g ≥ ⌈obs/g⌉
    total = int(np.dot(values, mult))
    need = -(-(total + observed) // 2)  # P ≥ ⌈(T + obs) / 2⌉
    if need <= 0:
        return 1.0
    if need > total:
        return 0.0
    size = _fft_size(total + 1)  # ≥ T + 1: the inverse does not wrap around
    freq = np.arange(size // 2 + 1, dtype=np.int64)
    product = np.ones(freq.size)
    floor = _NEGLIGIBLE / size
    for value, m in sorted(zip(values.tolist(), mult.tolist(), strict=True), key=lambda vm: -vm[1]):
        # the most repeated values first: they shrink the set of live frequencies fastest
        factor = np.cos(np.pi / size * ((freq * value) % (2 * size)))  # reduced first: exact phase
        product *= factor if m == 1 else factor**m
        live = np.abs(product) >= floor
        if not live.all():
            freq, product = freq[live], product[live]
    transform = np.zeros(size // 2 + 1, dtype=complex)
    transform[freq] = product * np.exp(-1j * np.pi / size * ((freq * total) % (2 * size)))
    dist = np.fft.irfft(transform, size)[: total + 1]
    return float(min(1.0, np.sum(np.clip(dist[need:], 0.0, None))))


_NEGLIGIBLE = 1e-30  # total probability a dropped frequency may move (see _float_tail)


def _fft_size(n: int) -> int:
    best = 1 << max(0, (n - 1).bit_length())
    five = 1
    while five < best:
        three = five
        while three < best:
            size = three
            while size < n:
                size *= 2
            best = min(best, size)
            three *= 3
        five *= 5
    return best


METHODS = ("exact", "float_tail", "exact_coarsened", "float_tail_coarsened", "monte_carlo")
EXACT_METHODS = ("exact", "exact_coarsened")  # numerator/denominator is the p itself


@dataclass(frozen=True)
class SignFlipResult:
    p_value: float
    method: str  # one of METHODS
    numerator: int  # exact methods: p = numerator / denominator; float tails: p ≤ it
    denominator: int
    coarsening: int = 1  # the *_coarsened methods: deltas rounded to this many integer units

    def describe(self) -> str:
        """How this p was reached, in words a verdict can print ("exact count 1/2^100")."""
        if self.method in EXACT_METHODS:
            den, num = self.denominator, self.numerator
            power = den.bit_length() - 1
            shown = f"2^{power}" if den == 1 << power and power >= 10 else str(den)
            text = f"exact count {num}/{shown}" if num < 10**6 else f"exact count over {shown} sign patterns"
        elif self.method == "monte_carlo":
            return (
                f"Monte Carlo, {self.denominator - 1:,} sign flips "
                f"(resolution 1/{self.denominator:,}: p cannot go below it)"
            )
        else:
            text = f"float tail, error ≤ {EXACT_MARGIN:g} (p ≤ {float(self.fraction):.4g})"
        if self.coarsening > 1:
            text += f", deltas rounded to {self.coarsening} units (Σ|d| past {EXACT_MAX_SPAN:,})"
        return text

    def at_most(self, alpha: float | Fraction) -> bool:
        """p ≤ alpha on integers (a float alpha read from its decimal text; a Fraction used exactly)."""
        level = alpha if isinstance(alpha, Fraction) else Fraction(str(alpha))
        return self.numerator * level.denominator <= level.numerator * self.denominator

    @property
    def fraction(self) -> Fraction:
        return Fraction(self.numerator, self.denominator)


def sign_flip_on_integers(
    deltas: np.ndarray | list[int], alpha: float | None = None
) -> SignFlipResult | None:
    """The exact one-sided p of integer paired deltas (zeros dropped). ``deltas``: int64 or Python ints.
    None past 2^24 deltas whose Σ|d| is past :data:`EXACT_MAX_SPAN` (the caller falls back to Monte Carlo)."""
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
        return _coarsened(deltas, span, n, alpha)
    return _tail(abs_array, observed, n, alpha)


def _exact_result(count: int, n: int) -> SignFlipResult:
    """count / 2^n; its float never 0 (below 2^-1074 the smallest positive float stands for it)."""
    return SignFlipResult(max(count / 2**n, _SMALLEST), "exact", count, 2**n)


_SMALLEST = math.ulp(0.0)


def _tail(abs_array: np.ndarray, observed: int, n: int, alpha: float | None) -> SignFlipResult:
    """The exact count when it is cheap or the decision needs it, else the float tail."""
    if n > 60:
        counted = _count_tail(abs_array.tolist(), observed)
        if counted is not None:
            return _exact_result(counted, n)
        approx = _float_tail(abs_array, observed)
        if alpha is None or abs(approx - alpha) > EXACT_MARGIN:
            # far from the decision boundary: the float tail decides the same way as exact
            # counts; reported as the upper bound it is (float + its error), never as a count
            denominator = 1 << 53
            numerator = min(denominator, math.ceil((approx + EXACT_MARGIN) * denominator))
            return SignFlipResult(numerator / denominator, "float_tail", numerator, denominator)
    return _exact_result(_count_at_least(abs_array.tolist(), observed), n)


def _coarsened(
    deltas: np.ndarray | list[int], span: int, n: int, alpha: float | None
) -> SignFlipResult | None:
    """The test on the deltas rounded to ``c`` units (d' = sign(d)·round(|d|/c)); None past 2^24 deltas."""
    if n > 1 << 24:
        return None
    # up to 60 deltas are counted in integers, whose cost grows with n·span: a shorter span
    target = EXACT_MAX_SPAN if n > 60 else EXACT_MAX_SPAN // 64
    coarsening = -(-span // target)
    ints = [int(d) for d in (deltas.tolist() if isinstance(deltas, np.ndarray) else deltas) if d != 0]
    rounded = [(1 if d > 0 else -1) * ((abs(d) + coarsening // 2) // coarsening) for d in ints]
    rounded = [d for d in rounded if d != 0]
    if not rounded:
        return SignFlipResult(1.0, "exact_coarsened", 1, 1, coarsening)
    result = _tail(np.abs(np.array(rounded, dtype=np.int64)), sum(rounded), len(rounded), alpha)
    return SignFlipResult(
        result.p_value, f"{result.method}_coarsened", result.numerator, result.denominator, coarsening
    )


# The exact tail count's budget, in bit operations of its packed-integer polynomial: well
# under a second (a p of 2^-100 on 100 tasks costs nothing; p ≈ 0.3 on 10,000 tasks is the
# float tail's job).
COUNT_BUDGET = 2**31


def _count_tail(abs_values: list[int], observed: int) -> int | None:
    """#{sign patterns with Σ s_i·v_i ≥ observed}, exactly, when that is cheap; else None.

    Σ s_i v_i = T − 2·M (M: the sum of the negatively signed values), so count subsets with sum ≤ ⌊(T −
    observed)/2⌋: few and short exactly when p is small. The truncated polynomial is one Python integer
    (coefficients packed B bits apart), so multiplying by (1 + x^v) is a shift and an add."""
    total = sum(abs_values)
    slack = (total - observed) // 2
    if slack < 0:
        return 0
    small = [v for v in abs_values if v <= slack]  # a larger value is never negatively signed
    width = len(small) + 2  # every coefficient, and their sum, is below 2^(len(small) + 1)
    bits = (slack + 1) * width
    if len(small) * bits > COUNT_BUDGET:
        return None
    mask = (1 << bits) - 1
    poly = 1
    for value in small:
        poly += (poly << (value * width)) & mask
    return poly % ((1 << width) - 1)  # Σ coefficients (below 2^width − 1, so mod reads it)


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
    flips = sign_flips(deltas.size, n_resamples, seed)
    count = sum(int(np.sum(signs @ magnitude >= observed - tolerance)) for signs in flips)
    return SignFlipResult((count + 1) / (n_resamples + 1), "monte_carlo", count + 1, n_resamples + 1)


def sign_flips(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """``n_resamples`` seeded ±1 patterns over ``n`` deltas, 2,000 at a time."""
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, 2000):
        yield rng.integers(0, 2, size=(min(2000, n_resamples - start), n), dtype=np.int8) * 2 - 1


def exact_task_deltas(
    candidate: np.ndarray, best: np.ndarray, rows: Sequence[int] | None = None
) -> list[Fraction]:
    """m_t(candidate) − m_t(best) as fractions over tasks valid on both sides, in task order. ``rows``:
    only these tasks, read on the whole matrices' grid."""
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
        sc, sb = (grid_sums(m, grid)[both].tolist() for m in (candidate, best))
        return [Fraction(a * d - b * c, grid * c * d) for a, b, c, d in zip(sc, sb, nc, nb, strict=True)]
    fc, fb = (_float_sums(m[both]) for m in (candidate, best))
    return [a / c - b / d for a, b, c, d in zip(fc, fb, nc, nb, strict=True)]


def _float_sums(matrix: np.ndarray) -> list[Fraction]:
    # r == r: not nan
    return [sum((Fraction(r) for r in row if r == r), Fraction(0)) for row in matrix.tolist()]


def exact_mean_delta(candidate: np.ndarray, best: np.ndarray) -> Fraction | None:
    """Δ̄ over tasks valid on both sides as one fraction (None when none): on a grid, one integer sum in
    numpy; off it, :func:`exact_task_deltas` averaged."""
    candidate, best = as_matrix(candidate), as_matrix(best)
    grid = reward_grid(candidate, best)
    counts = [(~np.isnan(m)).sum(axis=1) for m in (candidate, best)]
    both = (counts[0] > 0) & (counts[1] > 0)
    n = int(both.sum())
    if n == 0:
        return None
    if grid is None:
        return exact_mean(exact_task_deltas(candidate, best))
    deltas = scaled_deltas([grid_sums(m, grid) for m in (candidate, best)], counts, grid)
    total = sum(deltas.tolist() if isinstance(deltas, np.ndarray) else deltas)  # in Python ints: exact
    scale = math.lcm(*(int(c) for c in np.unique(np.concatenate([counts[0][both], counts[1][both]]))))
    return Fraction(total, scale * grid * n)


def exact_mean(deltas: Sequence[Fraction]) -> Fraction | None:
    return sum(deltas, Fraction(0)) / len(deltas) if deltas else None


def exact_spread(null_deltas: Sequence[float | Fraction | str]) -> Fraction | None:
    """The null controls' spread, max |Δ̄|, exactly, from the fractions their verdicts recorded."""
    exact = [abs(Fraction(d)) for d in null_deltas if not (isinstance(d, float) and math.isnan(d))]
    return max(exact, default=None)


def exceeds(delta: Fraction | None, spread: Fraction | None) -> bool:
    return spread is None or (delta is not None and delta > spread)


def exceeds_k_se(deltas: Sequence[Fraction], k: Fraction) -> bool | None:
    """Δ̄ > k·SE(d) on fractions: (k ≥ 0) iff Δ̄ > 0 and Δ̄²·n > k²·s², no square root. None when SE is 0
    or undefined (the caller falls back to Δ̄ > 0). A one-task gain has Δ̄ = SE exactly, a tie at k = 1
    that floats decided by the last bit (cap-evolve's issue #351)."""
    n = len(deltas)
    if n < 2:
        return None
    mean = sum(deltas, Fraction(0)) / n
    variance = sum(((d - mean) ** 2 for d in deltas), Fraction(0)) / (n - 1)
    if variance == 0:
        return None
    return mean > 0 and mean * mean * n > k * k * variance


def smallest_win(level: Fraction, n_tasks: int) -> int | None:
    """The fewest tasks improved, none worse, the exact test accepts at ``level``; None if all would not."""
    for improved in range(1, n_tasks + 1):
        result = sign_flip_on_integers([1] * improved + [0] * (n_tasks - improved), float(level))
        if result is not None and result.at_most(level):
            return improved
    return None


# A spread of exactly 0 among null controls is not "an MDE of 0": a reproducible agent (same
# seed, same output) shows no noise to scale an effect by, so no MDE can be estimated from it.
NOT_ESTIMABLE = "MDE not estimable: the nulls are identical (reproducible agent)"
NOT_ESTIMABLE_NO_NULLS = "MDE not estimable: the best's trials are identical (reproducible agent)"
