"""The sequential gate's outcome bets (``_stats/outcome_bets.py``, issue 40): every bet is fair when the
arms are exchangeable, the wealth holds Ville's bound and the joint swap p its level, enumerated over every
order of small vals; and the gate's choice of bet, as pure functions and hypothesis properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_capevolve._decide import stopping
from pytest_capevolve._session.sequential_gate import binary_pair
from pytest_capevolve._stats import outcome_bets as ob
from pytest_capevolve._stats import sequential as seq

EFFECTS = st.sampled_from([0.03, 0.05, ob.DESIGN_EFFECT, 0.2])


@settings(max_examples=30, deadline=None)
@given(trials=st.integers(1, 40), effect=EFFECTS)
def test_every_bet_is_fair_when_the_arms_are_exchangeable(trials: int, effect: float) -> None:
    theta = ob.design_theta(trials, effect)
    # θ is antisymmetric by its definition ((p − pᵀ) / (p + pᵀ)), exactly, so each factor's mean over
    # the two orders of any (a, b) is exactly 1: (1 + θ) + (1 − θ) = 2
    assert np.array_equal(theta, -theta.T)
    assert np.array_equal((1 + theta) + (1 + theta.T), np.full(theta.shape, 2.0))
    factors = np.exp(ob.design_steps(trials, effect))  # the table of log-factors, read back
    assert np.allclose((factors + factors.T) / 2, 1.0, rtol=0, atol=1e-12)
    assert (factors >= 1 - ob.MAX_THETA - 1e-12).all() and np.all(np.diag(theta) == 0)
    assert math.isclose(float(ob.design_law(trials, effect).sum()), 1.0, abs_tol=1e-9)
    assert not theta.flags.writeable  # cached once per trials count: nobody may edit it in place


def test_the_design_bets_for_the_candidate_where_it_is_better() -> None:
    theta = ob.design_theta(3)
    assert theta[1, 0] > 0 and theta[3, 2] > 0 and theta[0, 3] < 0
    # the design is the synthetic mix (mean rate ½): its integral matches a large sample of the mix
    rng = np.random.default_rng(2026)
    third = 100_000
    pool = np.concatenate([rng.beta(0.5, 6.0, third), rng.beta(6.0, 0.5, third), rng.uniform(0, 1, third)])
    sampled = ob.outcome_law(pool, ob.DESIGN_EFFECT, 3)
    assert np.allclose(sampled, ob.design_law(3), atol=2e-3)


def test_the_worst_theta_is_the_least_any_outcome_of_the_unknown_trials_gives() -> None:
    theta = ob.design_theta(3)
    assert theta[3, 0] < theta[2, 0]  # not monotone: a failure of the candidate is not always worse
    for a, da, b, db in itertools.product(range(4), range(4), range(4), range(4)):
        if a + da > 3 or b + db > 3:
            continue
        completions = [theta[x, y] for x in range(a, a + da + 1) for y in range(b, b + db + 1)]
        assert ob.worst_theta((a, da), (b, db), 3) == min(completions)


def reads(draw: st.DrawFn) -> ob.Outcomes:
    n = draw(st.integers(3, 9))
    trials = draw(st.integers(1, 3))
    pairs: list[tuple[int, int, int] | None] = []
    deltas = []
    for _ in range(n):
        graded = draw(st.booleans()) and draw(st.booleans())  # a quarter of the tasks graded
        a, b = draw(st.integers(0, trials)), draw(st.integers(0, trials))
        if graded:
            pairs.append(None)
            deltas.append(draw(st.sampled_from([-0.5, -0.25, 0.0, 0.25, 0.5, 0.75])))
        else:
            pairs.append((a, b, trials))
            deltas.append((a - b) / trials)
    return ob.outcomes(deltas, pairs)


def swapped(read: ob.Outcomes, signs: np.ndarray) -> ob.Outcomes:
    """The same tasks with the arms swapped where ``signs`` is −1."""
    return ob.Outcomes(read.deltas * signs, read.outcome, read.theta * signs, read.trials)


@settings(max_examples=6, deadline=None)
@given(read=st.composite(reads)(), alpha=st.sampled_from([0.05, 0.25]), seed=st.integers(0, 2**16))
def test_every_order_of_the_pairs_crosses_and_rejects_at_most_alpha(
    read: ob.Outcomes, alpha: float, seed: int
) -> None:
    # under exchangeable arms each of the 2^n orders of the tasks' pairs is equally likely: Ville's bound
    # is exact on them, and the joint swap p (seeded, R swaps) rejects at most α + its Monte Carlo slack
    orders = np.array(list(itertools.product((1, -1), repeat=read.size)), dtype=float)
    paths = ob.log_wealth(read, orders)
    crossed = ob.crossed(paths, alpha).any(axis=1)
    assert crossed.mean() <= alpha + 1e-12
    # the swap p computed exactly (every order its own swap) rejects at most α, with no slack at all
    statistic = np.where((paths >= math.log(1 / alpha) - ob.TOLERANCE).any(axis=1), np.inf, paths[:, -1])
    exact = np.array([np.mean(statistic >= t - ob.TOLERANCE) for t in statistic])
    assert np.mean(crossed | (exact <= alpha)) <= alpha + 1e-12
    resamples = 400
    accepted = crossed.copy()
    for i in np.flatnonzero(~crossed):
        num, den = ob.swap_p(swapped(read, orders[i]), alpha_efficacy=alpha, n_resamples=resamples, seed=seed)
        accepted[i] = num / den <= alpha
    assert accepted.mean() <= alpha + ob.monte_carlo_slack(resamples, alpha)


def test_the_swap_p_counts_crossings_and_paths_ending_above_the_observed() -> None:
    read = ob.outcomes([1 / 3, -1 / 3, 0.0, 2 / 3], [(1, 0, 3), (0, 1, 3), (2, 2, 3), (2, 0, 3)])
    orders = np.array(list(itertools.product((1, -1), repeat=read.size)), dtype=float)
    paths = ob.log_wealth(read, orders)
    observed = ob.log_wealth(read)[0, -1]
    exact = np.mean((paths >= math.log(20) - 1e-9).any(axis=1) | (paths[:, -1] >= observed - 1e-9))
    num, den = ob.swap_p(read, alpha_efficacy=0.05, n_resamples=4000, seed=1)
    assert den == 4001 and abs(num / den - exact) <= 3 * math.sqrt(exact * (1 - exact) / 4000) + 1 / 4000
    ties = ob.outcomes([0.0, 0.0], [(1, 1, 3), (3, 3, 3)])
    assert ob.swap_p(ties, alpha_efficacy=0.05) == (1, 1)  # nothing to swap: no evidence


def test_a_crossing_needs_the_level_plus_the_tolerance() -> None:
    level = math.log(20)
    assert not ob.crossed(np.array([level]), 0.05)[0]
    assert ob.crossed(np.array([level + 2 * ob.TOLERANCE]), 0.05)[0]


def test_a_task_bets_on_its_outcome_over_the_trials_valid_on_both_sides() -> None:
    assert binary_pair({0: 1.0, 1: 0.0, 2: 1.0}, {0: 0.0, 1: 0.0, 2: 1.0}) == (2, 1, 3)
    assert binary_pair({0: 1.0, 2: 1.0}, {0: 0.0, 1: 1.0, 2: 1.0}) == (2, 1, 2)  # trial j against trial j
    assert binary_pair({0: 1.0, 1: 0.5}, {0: 0.0, 1: 1.0}) is None  # graded: the delta


LEVELS = stopping.split(0.05)


def test_the_gate_says_what_it_bet_on_and_keeps_the_delta_process_on_graded_rewards() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.integers(1, 4, 40), rng.integers(0, 3, 40)
    deltas = ((a - b) / 3).tolist()
    binary = ob.outcomes(deltas, [(int(x), int(y), 3) for x, y in zip(a, b, strict=True)])
    graded = ob.outcomes(deltas, [None] * 40)
    mixed = ob.outcomes(deltas, [None] + [(int(x), int(y), 3) for x, y in zip(a[1:], b[1:], strict=True)])
    kwargs = {"alpha": LEVELS, "min_effect": 0.05, "total_tasks": 40}
    on_outcomes = stopping.track(binary, **kwargs)
    assert on_outcomes.bet == "outcome" and on_outcomes.state.stopped == seq.EFFICACY
    numbers = on_outcomes.numbers()
    assert numbers["bet"] == "outcome" and numbers["design_effect"] == ob.DESIGN_EFFECT
    assert numbers["design_trials"] == [3] and numbers["log_wealth"] >= numbers["log_threshold_efficacy"]
    assert numbers["log_wealth"] == pytest.approx(
        float(ob.log_wealth(binary)[0, on_outcomes.state.tasks - 1])
    )
    # graded rewards: today's delta e-process, number for number
    assert stopping.track(graded, **kwargs) == stopping.track(deltas, **kwargs)
    assert stopping.track(graded, **kwargs).numbers()["bet"] == "delta"
    assert stopping.track(mixed, **kwargs).bet == "outcome+delta"


def test_the_joint_p_is_the_swap_p_of_the_bets_made() -> None:
    rng = np.random.default_rng(9)
    a, b = rng.integers(0, 4, 12), rng.integers(0, 4, 12)
    deltas = ((a - b) / 3).tolist()
    binary = ob.outcomes(deltas, [(int(x), int(y), 3) for x, y in zip(a, b, strict=True)])
    graded = ob.outcomes(deltas, [None] * 12)
    kwargs = {"alpha": LEVELS, "min_effect": 0.05, "total_tasks": 12}
    for read, expected in (
        (binary, ob.swap_p(binary, alpha_efficacy=0.05, n_resamples=500, seed=3)),
        (graded, seq.exhaustion_p(np.asarray(deltas), alpha_efficacy=0.05, n_resamples=500, seed=3)),
    ):
        decision = stopping.track(read, **kwargs)
        assert stopping.joint_p(read, decision, n_resamples=500, seed=3) == expected
