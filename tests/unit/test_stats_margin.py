"""The margin test (_stats/margin.py): properties that would fail if it were wrong."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from pytest_capevolve._stats import margin as mt

deltas = st.lists(st.integers(-6, 6).map(lambda k: k / 6), min_size=1, max_size=40).map(np.array)
margins = st.sampled_from([-0.2, -0.1, -0.05, -0.02, 0.0])


@given(deltas, margins, st.randoms())
def test_task_order_does_not_matter(d: np.ndarray, margin: float, rnd: object) -> None:
    shuffled = d.copy()
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert mt.p_above(shuffled, margin) == mt.p_above(d, margin)  # bit for bit


@given(deltas, margins, st.floats(0.01, 0.5))
def test_a_stricter_margin_is_harder_to_clear(d: np.ndarray, margin: float, step: float) -> None:
    assert mt.p_above(d, margin + step) >= mt.p_above(d, margin) - 1e-12


@given(deltas, margins, st.integers(0, 39))
def test_a_better_task_never_raises_p(d: np.ndarray, margin: float, index: int) -> None:
    raised = d.copy()
    raised[index % d.size] = 1.0
    assert mt.p_above(raised, margin) <= mt.p_above(d, margin) + 1e-12


@settings(max_examples=60)
@given(
    st.integers(1, 12),
    st.sampled_from([-1.0, -0.5, -1 / 3, 0.0]),
    st.sampled_from([1 / 3, 0.5, 1.0]),
    margins,
    st.sampled_from([0.05, 0.1]),
)
def test_false_accepts_at_most_alpha_exactly(
    n: int, low: float, high: float, margin: float, alpha: float
) -> None:
    """Two-point deltas whose mean is exactly δ (the null's boundary): P(p ≤ α), summed over
    every outcome with scipy's binomial probabilities, is at most α."""
    if not low < margin < high:
        return
    q = (margin - low) / (high - low)  # P(d = high): mean exactly δ
    rejected = 0.0
    for k in range(n + 1):
        d = np.array([high] * k + [low] * (n - k))
        if mt.p_above(d, margin) <= alpha:
            rejected += scipy_stats.binom.pmf(k, n, q)
    assert rejected <= alpha + 1e-12


@given(deltas, margins)
def test_the_lower_bound_is_where_the_test_turns(d: np.ndarray, margin: float) -> None:
    bound = mt.lower_bound(d, 0.05)
    if bound > -1.0:
        assert mt.p_above(d, bound - 1e-6) <= 0.05
    if bound < 1.0 - 1e-6:
        assert mt.p_above(d, min(bound + 1e-6, 0.999)) > 0.05


@given(deltas, st.sampled_from([0.02, 0.05, 0.1, 0.3]))
def test_equivalence_needs_both_sides(d: np.ndarray, bound: float) -> None:
    result = mt.margin_test(d, kind=mt.EQUIVALENCE, margin=bound, alpha=0.05)
    assert result.p_value >= mt.p_above(d, -bound)
    assert result.p_value >= mt.p_below(d, bound)
    assert result.upper is not None and result.lower <= result.upper + 1e-9


def test_clear_non_inferiority_is_accepted_and_clear_loss_is_not() -> None:
    even = np.zeros(400)
    assert mt.margin_test(even, kind=mt.NON_INFERIORITY, margin=-0.05, alpha=0.05).p_value <= 0.05
    worse = np.full(400, -0.1)
    assert mt.margin_test(worse, kind=mt.NON_INFERIORITY, margin=-0.05, alpha=0.05).p_value == 1.0
    assert mt.margin_test(even, kind=mt.EQUIVALENCE, margin=0.05, alpha=0.05).p_value <= 0.05
    assert mt.margin_test(np.full(400, 0.2), kind=mt.EQUIVALENCE, margin=0.05, alpha=0.05).p_value == 1.0


@pytest.mark.parametrize(
    ("kind", "margin"), [(mt.NON_INFERIORITY, 0.02), (mt.NON_INFERIORITY, -1.0), (mt.EQUIVALENCE, 0.0)]
)
def test_margins_outside_their_range_are_refused(kind: str, margin: float) -> None:
    with pytest.raises(ValueError, match="lies in"):
        mt.margin_test(np.zeros(5), kind=kind, margin=margin, alpha=0.05)


def test_twelve_ties_cannot_show_non_inferiority() -> None:
    """The shift test's trap: 12 ties shifted by +0.05 look like 12 wins; here they are not."""
    assert mt.p_above(np.zeros(12), -0.05) > 0.05
    assert math.isfinite(mt.log_e_value(np.full(12, -1.0), -0.05))


@given(deltas, margins, st.sampled_from([0.01, 0.025, 0.05, 0.1]))
def test_p_is_one_number_whatever_level_reads_it(d: np.ndarray, margin: float, alpha: float) -> None:
    """Holm's levels and α schedules read p at several levels: the bets must not depend on it."""
    at = mt.margin_test(d, kind=mt.NON_INFERIORITY, margin=margin, alpha=alpha)
    assert at.p_value == mt.margin_test(d, kind=mt.NON_INFERIORITY, margin=margin, alpha=0.05).p_value
