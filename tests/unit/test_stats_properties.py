"""The gate's statistics as pure functions and hypothesis properties."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import gate
from pytest_capevolve.strategies import null_arms, planted_effect_arms, reward_matrices

EXACT = gate.GateConfig(mode="exact", alpha=0.05, min_coverage=0.0)
IDS = [f"t{i}" for i in range(600)]


def decide(candidate, best, config=EXACT, **kw):
    return gate.decide(
        candidate, best, tag="c", against="b", task_ids=IDS[: len(candidate)], config=config, **kw
    )


def deltas_matrix(deltas):
    """Arms whose per-task deltas are exactly ``deltas`` (one trial each, best at 0 or 1)."""
    deltas = np.asarray(deltas, dtype=float)
    best = np.where(deltas >= 0, 0.0, 1.0)
    return (best + deltas)[:, None], best[:, None]


@given(null_arms(), st.randoms(use_true_random=False))
def test_invariant_to_task_order_and_trial_order(arms, rnd):
    cand, best = arms
    base = decide(cand, best)
    order = list(range(len(cand)))
    rnd.shuffle(order)
    shuffled = decide(cand[order], best[order])
    trial_order = list(range(cand.shape[1]))
    rnd.shuffle(trial_order)
    trials = decide(cand[:, trial_order], best[:, trial_order])
    assert base.decision == shuffled.decision == trials.decision
    assert base.p_value == shuffled.p_value == trials.p_value


@given(reward_matrices(grid=4, max_tasks=12, min_trials=2, max_trials=2), st.integers(0, 2))
def test_constant_added_to_both_arms_on_a_task_changes_nothing(matrix, offset):
    best = matrix * 0.5
    cand = matrix[::-1] * 0.5
    moved_c, moved_b = cand.copy(), best.copy()
    moved_c[0] += offset / 4
    moved_b[0] += offset / 4
    assert decide(cand, best).p_value == decide(moved_c, moved_b).p_value


@given(null_arms())
def test_antisymmetry(arms):
    a, b = arms
    ab, ba = decide(a, b), decide(b, a)
    assert ab.delta_mean == pytest.approx(-ba.delta_mean)
    assert not (ab.decision == "accept" and ba.decision == "accept")


@given(st.lists(st.integers(-8, 8), min_size=2, max_size=14), st.data())
def test_monotone_raising_one_delta_never_turns_accept_into_reject(ints, data):
    deltas = [i / 8 for i in ints]
    i = data.draw(st.integers(0, len(deltas) - 1))
    raise_by = data.draw(st.integers(1, 8)) / 8
    assume(deltas[i] + raise_by <= 1)
    raised = list(deltas)
    raised[i] += raise_by
    before, after = decide(*deltas_matrix(deltas)), decide(*deltas_matrix(raised))
    assert after.p_value <= before.p_value
    assert not (before.decision == "accept" and after.decision == "reject")


def test_legacy_rule_gets_monotonicity_wrong_and_exact_does_not():
    paired = gate.GateConfig(mode="paired", k_se=2.5, min_coverage=0.0)
    small = [0.1] * 10
    big = [1.0] + [0.1] * 9
    assert decide(*deltas_matrix(small), config=paired).decision == "accept"
    assert decide(*deltas_matrix(big), config=paired).decision == "reject"  # the legacy flaw
    assert decide(*deltas_matrix(small)).decision == "accept"
    assert decide(*deltas_matrix(big)).decision == "accept"


@pytest.mark.parametrize("n", [1, 2, 5, 40, 100, 500])
def test_one_task_that_moves_gives_p_one_half(n):
    deltas = [0.0] * n
    deltas[n // 2] = 1.0
    verdict = decide(*deltas_matrix(deltas))
    assert verdict.p_exact == "1/2"
    assert verdict.decision == "reject"


@given(
    st.lists(st.integers(0, 5), min_size=3, max_size=16), st.lists(st.integers(0, 5), min_size=3, max_size=16)
)
def test_one_ulp_nudges_never_change_an_exact_decision(a, b):
    n = min(len(a), len(b))
    cand = np.array(a[:n], float)[:, None] / 5
    best = np.array(b[:n], float)[:, None] / 5
    nudged = np.clip(np.nextafter(cand, 2.0), 0, 1)
    assert decide(cand, best).decision == decide(nudged, best).decision
    assert decide(cand, best).p_exact == decide(nudged, best).p_exact


def test_edge_cases():
    empty = np.empty((0, 3))
    assert gate.decide(empty, empty, tag="c", against="b", task_ids=[], config=EXACT).decision == "indecisive"
    zeros = decide(np.zeros((5, 3)), np.zeros((5, 3)))
    assert zeros.decision == "reject" and zeros.p_value == 1.0
    one = decide(np.ones((1, 3)), np.zeros((1, 3)))
    assert one.decision == "reject"
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        decide(np.array([[np.inf]]), np.zeros((1, 1)))
    with pytest.raises(gate.GateSplitError):
        gate.decide(
            np.ones((2, 1)),
            np.zeros((2, 1)),
            tag="c",
            against="b",
            task_ids=IDS[:2],
            config=EXACT,
            split="train",
        )


@given(planted_effect_arms())
def test_a_task_with_no_valid_trial_changes_nothing(arms):
    cand, best = arms
    base = decide(cand, best)
    cand2 = np.vstack([cand, np.full((1, cand.shape[1]), np.nan)])
    best2 = np.vstack([best, np.ones((1, best.shape[1]))])
    extended = decide(cand2, best2)
    assert (extended.decision, extended.p_value) == (base.decision, base.p_value)


@given(reward_matrices(max_tasks=15), reward_matrices(max_tasks=15))
def test_duplicating_every_trial_changes_no_decision(a, b):
    n = min(len(a), len(b))
    k = min(a.shape[1], b.shape[1])
    a, b = a[:n, :k], b[:n, :k]
    assert decide(a, b).decision == decide(np.repeat(a, 2, axis=1), np.repeat(b, 2, axis=1)).decision


def test_coverage_below_minimum_is_indecisive_not_reject():
    cand = np.ones((10, 2))
    cand[:5] = np.nan
    verdict = decide(cand, np.zeros((10, 2)), config=gate.GateConfig(min_coverage=0.8))
    assert verdict.decision == "indecisive" and verdict.basis == "coverage"


def test_error_imbalance_that_imputation_would_flip_is_indecisive():
    cand = np.array([[1, 1]] * 6 + [[np.nan, np.nan]] * 4, float)
    best = np.array([[0, 0]] * 6 + [[1, 1]] * 4, float)
    verdict = decide(
        cand, best, config=gate.GateConfig(min_coverage=0.5), infra_errors={"candidate": 8, "best": 0}
    )
    assert verdict.decision == "indecisive" and verdict.basis == "error_imbalance"


@given(st.lists(st.integers(0, 1), min_size=1, max_size=8), st.integers(1, 8))
def test_pass_at_k_and_pass_hat_k_equal_brute_force(trials, k):
    row = np.array([trials], float)
    n = len(trials)
    if k > n:
        assert stats.pass_at_k(row, k) is None and stats.pass_hat_k(row, k) is None
        return
    subsets = list(itertools.combinations(trials, k))
    assert stats.pass_at_k(row, k) == pytest.approx(np.mean([any(s) for s in subsets]))
    assert stats.pass_hat_k(row, k) == pytest.approx(np.mean([all(s) for s in subsets]))


def test_nan_reward_in_task_means_is_missing_but_inf_is_an_error():
    assert stats.task_means(np.array([[1.0, np.nan]]))[0] == 1.0
    with pytest.raises(ValueError):
        stats.task_means(np.array([[2.0]]))


def test_exact_and_float_paths_agree():
    rng = np.random.default_rng(3)
    a = (rng.random((90, 5)) < 0.6).astype(float)
    b = (rng.random((90, 5)) < 0.5).astype(float)
    fast = stats.sign_flip_test(a, b)
    exact = stats.sign_flip_test(a, b, alpha=fast.p_value)  # forces the big-integer path
    assert fast.p_value == pytest.approx(exact.p_value, rel=1e-9)
