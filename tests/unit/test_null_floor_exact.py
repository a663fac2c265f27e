"""The null floor is decided on exact fractions: an exact tie never exceeds it, whichever way
round the floats of the two arrangements happen to fall (issue 25, item 7)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from gate_calls import decide

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import stopping
from pytest_capevolve._decide.verdict import Verdict

# Two arrangements of 3-trial successes over 18 tasks, each summing to 21 thirds: both Δ̄ are
# exactly 7/18 against an all-zero best, but np.mean gives 0.38888888888888895 for the first
# and 0.3888888888888888 for the second.
HIGH = [2, 1, 3, 1, 0, 1, 0, 3, 1, 2, 3, 0, 2, 0, 0, 0, 0, 2]
LOW = [2, 1, 2, 1, 1, 1, 1, 3, 2, 2, 2, 0, 0, 1, 0, 0, 1, 1]
BEST = np.zeros((18, 3))


def arm(successes: list[int]) -> np.ndarray:
    return np.array([[1.0] * k + [0.0] * (3 - k) for k in successes])


def test_the_reproducing_arrangements_differ_as_floats_and_tie_as_fractions():
    high, low = decide(arm(HIGH), BEST), decide(arm(LOW), BEST)
    assert high.delta_mean > low.delta_mean  # the float rounding the old floor decided on
    assert Fraction(high.delta_exact) == Fraction(low.delta_exact) == Fraction(7, 18)


@pytest.mark.attack(
    "laundering",
    attack="a candidate tied exactly with a null control, compared in floats",
    outcome="prevented: the null floor compares exact fractions",
)
def test_a_candidate_tied_exactly_with_a_null_is_rejected_either_way_round():
    for candidate, null in ((HIGH, LOW), (LOW, HIGH)):
        null_verdict = decide(arm(null), BEST)
        floor = [Fraction(null_verdict.delta_exact)]
        verdict = decide(arm(candidate), BEST, null_deltas=floor)
        assert verdict.decision == "reject" and verdict.basis == "null_floor", candidate
        assert verdict.null_spread_exact == "7/18"
        # without the null the exact rule accepts it: the floor is what rejected it
        assert decide(arm(candidate), BEST).decision == "accept"


def test_a_candidate_above_an_exact_null_by_the_smallest_step_is_accepted():
    above = list(HIGH)
    above[4] += 1  # 22 thirds over 18 tasks: 11/27 > 7/18
    verdict = decide(arm(above), BEST, null_deltas=[Fraction(7, 18)])
    assert verdict.decision == "accept"


def test_exact_deltas_read_grid_rewards_as_their_fractions_and_others_as_their_floats():
    grid = stats.exact_task_deltas(np.array([[1 / 3, 2 / 3]]), np.array([[0.0, 0.0]]))
    assert grid == [Fraction(1, 2)]
    off = stats.exact_task_deltas(np.array([[0.1234567]]), np.array([[np.nan]]))
    assert off == []  # no valid trial on the best's side: not paired
    off = stats.exact_task_deltas(np.array([[0.1234567]]), np.array([[0.0]]))
    assert off == [Fraction(0.1234567)]
    assert stats.exact_spread([-0.5, Fraction(1, 3), "1/4"]) == Fraction(1, 2)


def test_the_sequential_gates_early_accept_uses_the_same_exact_floor():
    for candidate, null in ((HIGH, LOW), (LOW, HIGH)):
        null_verdict = decide(arm(null), BEST)
        verdict: Verdict = decide(arm(candidate), BEST, null_deltas=[Fraction(null_verdict.delta_exact)])
        state = stopping.track(
            [1.0] * 10, alpha=stopping.split(Fraction(1, 20)), min_effect=0.05, total_tasks=18
        )
        assert state.state.stopped == "efficacy"
        assert stopping.early_verdict(verdict, state).basis == "null_floor"


def test_the_fast_exact_mean_is_the_mean_of_the_exact_task_deltas():
    rng = np.random.default_rng(3)
    for scale in (1.0, 0.37):  # on a grid, then off one
        cand = (rng.random((40, 3)) < 0.5) * scale
        best = (rng.random((40, 3)) < 0.5) * scale
        cand[2, 1] = np.nan  # mixed trial counts
        whole = stats.exact_task_deltas(cand, best)
        assert stats.exact_mean_delta(cand, best) == stats.exact_mean(whole)
        assert stats.exact_task_deltas(cand, best, rows=[2, 5]) == [whole[2], whole[5]]
