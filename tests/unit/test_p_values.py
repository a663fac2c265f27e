"""p-values reported as what they are (issue 39, item 3): checked against brute-force
enumeration of every sign pattern and the binomial closed form, never against the code's own
other paths alone."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import gate
from pytest_capevolve._stats import sign_flip


def enumerated(deltas: list[int]) -> Fraction:
    """#{sign patterns s with Σ s_i·|d_i| ≥ Σ d_i} / 2^N over the nonzero deltas, by brute force."""
    nonzero = [d for d in deltas if d]
    observed = sum(nonzero)
    hits = sum(
        1
        for signs in itertools.product((1, -1), repeat=len(nonzero))
        if sum(s * abs(d) for s, d in zip(signs, nonzero, strict=True)) >= observed
    )
    return Fraction(hits, 2 ** len(nonzero))


def binomial_tail(up: int, down: int) -> Fraction:
    """Unit deltas, ``up`` positive and ``down`` negative: P(#positive signs ≥ up), exactly."""
    n = up + down
    return Fraction(sum(math.comb(n, k) for k in range(up, n + 1)), 2**n)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(-7, 7), min_size=1, max_size=13))
def test_exact_p_and_tail_count_equal_enumeration(deltas):
    result = stats.sign_flip_on_integers(deltas)
    assert result is not None and result.method == "exact"
    assert result.fraction == enumerated(deltas) and result.p_value > 0
    nonzero = [abs(d) for d in deltas if d]
    if nonzero:
        assert sign_flip._count_tail(nonzero, sum(d for d in deltas if d)) == enumerated(deltas) * 2 ** len(
            nonzero
        )


@settings(max_examples=60, deadline=None)
@given(st.integers(61, 3000), st.data())
def test_past_sixty_tasks_the_p_is_a_count_or_a_named_upper_bound(n, data):
    down = data.draw(st.integers(0, n // 2))
    truth = binomial_tail(n - down, down)
    levels = [None, 0.05] + ([float(truth)] if n <= 400 else [])  # at α itself: the full count
    alpha = data.draw(st.sampled_from(levels))
    result = stats.sign_flip_on_integers([1] * (n - down) + [-1] * down, alpha)
    assert result is not None and result.p_value > 0
    if result.method == "exact":
        assert result.fraction == truth
    else:  # the float tail: an upper bound within its stated error, never relabelled a count
        assert result.method == "float_tail" and result.denominator == 2**53
        assert truth <= result.fraction <= truth + Fraction(2 * stats.EXACT_MARGIN)
        assert n > 1000 or truth > Fraction(1, 10**6)  # up to 1,000 tasks a small p is counted
    if alpha is not None:  # the decision is the exact one
        assert result.at_most(alpha) == (truth <= Fraction(str(alpha)))


def test_a_hundred_tasks_all_improved_is_two_to_the_minus_hundred_not_zero():
    candidate, best = np.ones((100, 3)), np.zeros((100, 3))
    result = stats.sign_flip_test(candidate, best, alpha=0.05)
    assert (result.method, result.numerator, result.denominator) == ("exact", 1, 2**100)
    assert result.p_value == 2.0**-100 > 0
    verdict = gate.decide(
        candidate,
        best,
        tag="c",
        against="b",
        task_ids=[f"t{i}" for i in range(100)],
        config=gate.GateConfig(),
    )
    assert verdict.p_exact == f"1/{2**100}" and verdict.p_method == "exact"
    assert "exact count 1/2^100" in verdict.reason


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(1, 9).flatmap(lambda v: st.sampled_from([v, -v])), min_size=17, max_size=90),
    st.integers(2, 5),
)
def test_a_span_too_wide_is_the_exact_test_of_rounded_deltas(small, scale):
    """Past EXACT_MAX_SPAN the deltas are rounded to c units: an odd function of each delta, so
    the result is the enumerated p of the rounded deltas, and says so."""
    unit = sign_flip.EXACT_MAX_SPAN  # every |d| a multiple of the span: Σ|d| is far past it
    deltas = [d * unit * scale for d in small]
    if sum(abs(d) for d in deltas) <= sign_flip.EXACT_MAX_SPAN:
        return
    result = stats.sign_flip_on_integers(deltas)
    assert result is not None and result.method in ("exact_coarsened", "float_tail_coarsened")
    c = result.coarsening
    rounded = [(1 if d > 0 else -1) * ((abs(d) + c // 2) // c) for d in deltas if d]
    if result.method == "exact_coarsened":
        assert result.fraction == stats.sign_flip_on_integers(rounded).fraction
    assert f"deltas rounded to {c} units" in result.describe()


def test_monte_carlo_names_its_resolution():
    off_grid = np.full(20, 0.3141592653589793)
    result = stats.sign_flip_test(off_grid[:, None], np.zeros((20, 1)), n_resamples=2000)
    assert result.method == "monte_carlo" and result.fraction == Fraction(1, 2001)
    assert "resolution 1/2,001" in result.describe()
