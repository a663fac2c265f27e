"""Every honesty rule the docs state about decisions, pinned at its boundary.

Decision-level tests build small reward matrices by hand, so the expected decision is known
exactly: p just below and just above α, Δ̄ just above and just below the null spread, coverage
exactly at and just under the minimum. Each test fails when its rule is removed or weakened
(docs/explanation/the-gate.md, "What the gate promises", names the test for each promise). The rule that lives in
session code has its end-to-end test in tests/e2e/test_honesty_rules.py.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import gate
from pytest_capevolve._policy.gate import verdicts as judging
from pytest_capevolve._store.readers import evidence
from unit.test_evidence_cells import infra_count

ACCEPT, REJECT, INDECISIVE = gate.ACCEPT, gate.REJECT, gate.INDECISIVE
EXACT = gate.GateConfig()  # the default gate: exact sign-flip test, α = 0.05, min_coverage 0.8


def judge(candidate, best, config=EXACT, **kw):
    candidate, best = np.asarray(candidate, float), np.asarray(best, float)
    ids = [f"t{i}" for i in range(len(candidate))]
    return gate.decide(candidate, best, tag="cand", against="best", task_ids=ids, config=config, **kw)


def one_trial_arms(deltas):
    """Binary arms, one trial per task, whose per-task deltas are exactly ``deltas`` (−1, 0, 1)."""
    deltas = np.asarray(deltas, dtype=float)
    best = np.where(deltas >= 0, 0.0, 1.0)
    return (best + deltas)[:, None], best[:, None]


def moved(k, n=10):
    """n tasks of which the first k improved from 0 to 1: p = 1/2^k exactly, Δ̄ = k/n."""
    return one_trial_arms([1] * k + [0] * (n - k))


def brute_force_p(deltas) -> Fraction:
    """Reference one-sided sign-flip p-value: share of the 2^N sign patterns of the nonzero
    deltas whose sum is at least the observed one (exact rational arithmetic)."""
    values = [Fraction(d).limit_denominator(10**6) for d in deltas if d != 0]
    if not values:
        return Fraction(1)
    observed = sum(values)
    hits = sum(
        1
        for signs in itertools.product((1, -1), repeat=len(values))
        if sum(s * abs(v) for s, v in zip(signs, values, strict=True)) >= observed
    )
    return Fraction(hits, 2 ** len(values))


# -- the gate's α ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k, alpha, decision",
    [
        (5, 0.05, ACCEPT),  # p = 1/32 = 0.03125 ≤ α
        (4, 0.05, REJECT),  # p = 1/16 = 0.0625: above α (though below 2α)
        (4, 0.0625, ACCEPT),  # p = α exactly: accepted (p ≤ α, not p < α)
        (4, 0.0624, REJECT),  # p just above α
        (5, 0.0313, ACCEPT),  # p just below α
        (5, 0.0312, REJECT),  # p just above α
        (1, 0.5, ACCEPT),  # one moved task: p = 1/2, accepted only when α ≥ 1/2
        (1, 0.49, REJECT),
    ],
)
def test_exact_gate_accepts_iff_p_at_most_alpha(k, alpha, decision):
    cand, best = moved(k)
    verdict = judge(cand, best, gate.GateConfig(alpha=alpha))
    assert verdict.p_exact == f"1/{2**k}" and verdict.p_value == 1 / 2**k
    assert Fraction(verdict.p_exact) == brute_force_p((cand - best).ravel())
    assert (verdict.decision, verdict.basis) == (decision, "exact")
    assert verdict.alpha == alpha and verdict.mode == "exact"
    assert ("≤" if decision == ACCEPT else ">") + f" α = {alpha}" in verdict.reason


@pytest.mark.parametrize(
    "deltas",
    [
        [1, 1, 1, 1, 1, 1, -1, 0, 0, 0],  # p = 8/128 = 0.0625: just above α
        [1, 1, 1, 1, 1, 1, 1, -1, 0, 0],  # p = 9/256 ≈ 0.0352: below α
        [1, 1, 1, 1, 1, -1, -1, 1, 1, 1],  # p = 56/1024 ≈ 0.0547: just above α
        [1, 1, 1, 1, 1, 1, 1, 1, -1, -1],  # p = 56/1024 as well
        [1, 1, 1, 1, 1, 1, 1, 1, 1, -1],  # p = 11/1024 ≈ 0.0107
    ],
)
def test_exact_gate_decision_matches_a_brute_force_p_at_alpha(deltas):
    cand, best = one_trial_arms(deltas)
    verdict = judge(cand, best)
    expected = brute_force_p(deltas)
    assert Fraction(verdict.p_exact) == expected
    assert verdict.decision == (ACCEPT if expected <= Fraction(1, 20) else REJECT)


def test_p_values_on_a_finer_reward_grid_are_exact_fractions():
    # three trials per task: per-task means are multiples of 1/3, deltas of unequal size
    cand = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0], [0, 0, 0]], float)
    best = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [1, 0, 0], [0, 0, 0], [1, 0, 0]], float)
    verdict = judge(cand, best)
    expected = brute_force_p(stats.task_means(cand) - stats.task_means(best))
    assert Fraction(verdict.p_exact) == expected == Fraction(3, 64)
    assert verdict.decision == ACCEPT  # 3/64 ≈ 0.047 ≤ 0.05
    assert judge(cand, best, gate.GateConfig(alpha=0.046)).decision == REJECT


def test_a_worse_or_unchanged_candidate_is_never_accepted_even_at_a_generous_alpha():
    lenient = gate.GateConfig(alpha=0.4)
    assert judge(*one_trial_arms([-1] * 6 + [0] * 4), config=lenient).decision == REJECT
    unchanged = judge(np.ones((10, 2)), np.ones((10, 2)), lenient)
    assert unchanged.decision == REJECT and unchanged.p_value == 1.0 and unchanged.footprint == []


# -- the null-control floor -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "nulls, decision",
    [
        (None, ACCEPT),  # no null controls: the test alone decides
        ([0.1, -0.2], ACCEPT),
        ([0.4999], ACCEPT),  # Δ̄ = 0.5 just above the null spread
        ([0.5], REJECT),  # Δ̄ equal to the spread does not exceed it
        ([0.5001], REJECT),  # Δ̄ just below the null spread
        ([0.1, -0.6], REJECT),  # the spread is the largest |null delta|, either sign
    ],
)
def test_null_floor_rejects_what_the_nulls_own_spread_could_explain(nulls, decision):
    cand, best = moved(5)  # Δ̄ = 0.5, p = 1/32: the test alone accepts
    verdict = judge(cand, best, null_deltas=nulls)
    assert verdict.delta_mean == 0.5 and verdict.p_value == 1 / 32
    assert verdict.decision == decision
    if nulls is None:
        assert verdict.null_spread is None and verdict.bar is None and verdict.basis == "exact"
    else:
        spread = max(abs(d) for d in nulls)
        assert verdict.null_spread == spread and verdict.bar == spread
        assert verdict.basis == ("exact" if decision == ACCEPT else "null_floor")
    if decision == REJECT:
        assert "does not exceed the null controls' own spread" in verdict.reason


def test_null_floor_raises_a_legacy_bar_and_keeps_a_larger_one():
    paired = gate.GateConfig(mode="paired", k_se=0.1)
    cand, best = moved(5)
    small = judge(cand, best, paired, null_deltas=[0.01])
    assert small.decision == ACCEPT and small.bar == pytest.approx(0.1 * small.se)  # rule's bar larger
    floor = judge(cand, best, paired, null_deltas=[0.6])
    assert (floor.decision, floor.basis, floor.bar) == (REJECT, "null_floor", 0.6)


def test_null_floor_never_turns_a_reject_into_anything_else():
    cand, best = moved(4)  # p = 1/16: rejected by the test
    verdict = judge(cand, best, null_deltas=[0.9])
    assert (verdict.decision, verdict.basis) == (REJECT, "exact")
    assert verdict.bar == 0.9


# -- the coverage guard ---------------------------------------------------------------------------


def test_coverage_exactly_at_the_minimum_is_judged_and_just_below_is_indecisive():
    cand, best = one_trial_arms([1] * 8 + [0, 0])
    cand[8:] = np.nan  # 2 of 10 tasks have no valid candidate trial: paired coverage 0.8
    at_min = judge(cand, best, gate.GateConfig(min_coverage=0.8))
    assert at_min.coverage["paired"] == 0.8 and at_min.n_tasks == 8
    assert (at_min.decision, at_min.basis) == (ACCEPT, "exact")  # p = 1/256
    below = judge(cand, best, gate.GateConfig(min_coverage=0.81))
    assert (below.decision, below.basis) == (INDECISIVE, "coverage")  # not accept, not reject
    assert "below min_coverage 81%" in below.reason


def test_coverage_counts_the_best_side_too():
    cand, best = one_trial_arms([1] * 8 + [0, 0])
    best[:3] = np.nan  # the candidate ran everywhere, the best lost three tasks
    verdict = judge(cand, best)
    assert verdict.coverage == {"candidate": 1.0, "best": 0.7, "paired": 0.7}
    assert (verdict.decision, verdict.basis) == (INDECISIVE, "coverage")


def test_a_task_keeps_counting_while_one_trial_is_valid():
    cand = np.array([[1, np.nan, np.nan]] * 6, float)
    verdict = judge(cand, np.zeros((6, 3)), gate.GateConfig(min_coverage=1.0))
    assert verdict.coverage["paired"] == 1.0 and verdict.decision == ACCEPT


def test_no_task_valid_on_both_sides_is_indecisive_even_with_no_minimum():
    cand = np.full((4, 2), np.nan)
    verdict = judge(cand, np.ones((4, 2)), gate.GateConfig(min_coverage=0.0))
    assert (verdict.decision, verdict.basis, verdict.n_tasks) == (INDECISIVE, "coverage", 0)
    assert "no task is valid on both sides" in verdict.reason


# -- infra errors: missing data, and the imbalance guard ------------------------------------------


def test_an_infra_error_is_missing_data_never_a_zero(val_rollout):
    records = {
        ("t0", 0): val_rollout("c", "t0", 0, 1.0),
        ("t0", 1): val_rollout("c", "t0", 1, 0.0, "503 from the API"),  # a stale reward is ignored
        ("t1", 0): val_rollout("c", "t1", 0, None, "timeout"),
    }
    matrix = evidence.reward_matrix(records, ["t0", "t1"], 2)
    assert matrix[0, 0] == 1.0 and np.isnan(matrix[0, 1]) and np.isnan(matrix[1]).all()
    assert infra_count(records, ["t0", "t1"], 2) == 2
    assert stats.task_means(matrix)[0] == 1.0  # mean over valid trials only
    assert np.isnan(stats.task_means(matrix)[1]) and stats.coverage(matrix) == 0.5


FLIPPABLE_ACCEPT = (  # Δ̄ = +1/3 on 5 tasks (p = 1/32); the candidate's missing trials as fails: −1/3
    np.array([[1, np.nan, np.nan]] * 5, float),
    np.array([[0, 1, 1]] * 5, float),
)
FLIPPABLE_REJECT = (  # Δ̄ = −1/3; the candidate's missing trials as passes: +1/3 on 5 tasks
    np.array([[0, np.nan, np.nan]] * 5, float),
    np.array([[1, 0, 0]] * 5, float),
)
STABLE_ACCEPT = (  # Δ̄ = +1; worst case for the candidate is still +2/3 on 5 tasks
    np.array([[1, 1, np.nan]] * 5, float),
    np.array([[0, 0, 0]] * 5, float),
)


@pytest.mark.parametrize(
    "arms, unimputed", [(FLIPPABLE_ACCEPT, ACCEPT), (FLIPPABLE_REJECT, REJECT)], ids=["accept", "reject"]
)
def test_error_imbalance_that_imputation_would_flip_is_indecisive(arms, unimputed):
    cand, best = arms
    assert judge(cand, best).decision == unimputed  # no imbalance reported: the test decides
    verdict = judge(cand, best, infra_errors={"candidate": 10, "best": 0})
    assert (verdict.decision, verdict.basis) == (INDECISIVE, "error_imbalance")
    assert "(10 vs 0)" in verdict.reason and verdict.infra_errors == {"candidate": 10, "best": 0}


def test_error_imbalance_that_imputation_would_not_flip_leaves_the_decision():
    verdict = judge(*STABLE_ACCEPT, infra_errors={"candidate": 5, "best": 0})
    assert (verdict.decision, verdict.basis) == (ACCEPT, "exact")


def test_equal_error_counts_are_no_imbalance():
    verdict = judge(*FLIPPABLE_ACCEPT, infra_errors={"candidate": 10, "best": 10})
    assert (verdict.decision, verdict.basis) == (ACCEPT, "exact")


def test_imputation_fills_the_best_against_the_decision_too():
    # accepted on the valid trials (+1/2 on 5 tasks); only the best's missing trials, filled
    # as passes, would flip it (the candidate has none missing)
    cand = np.array([[1, 0]] * 5, float)
    best = np.array([[0, np.nan]] * 5, float)
    assert judge(cand, best).decision == ACCEPT
    verdict = judge(cand, best, infra_errors={"candidate": 0, "best": 5})
    assert (verdict.decision, verdict.basis) == (INDECISIVE, "error_imbalance")


# -- the regression veto --------------------------------------------------------------------------


def veto_arms():
    """12 tasks × 4 trials: ten improve 0 → 1; the best passed t10 and t11, which drop.

    t10: best [1,1,1,1] → candidate [1,0,0,0]: drop 0.75 > noise 2·SE = 0.5 (a regression)
    t11: best [1,1,1,1] → candidate [1,1,0,0]: drop 0.5 < noise 2·SE ≈ 0.577 (within noise)
    """
    cand = np.array([[1, 1, 1, 1]] * 10 + [[1, 0, 0, 0], [1, 1, 0, 0]], float)
    best = np.array([[0, 0, 0, 0]] * 10 + [[1, 1, 1, 1], [1, 1, 1, 1]], float)
    return cand, best


def test_regressions_are_listed_and_vetoed_only_when_asked():
    cand, best = veto_arms()
    listed = judge(cand, best)
    assert (listed.decision, listed.basis) == (ACCEPT, "exact")
    assert [r["task_id"] for r in listed.regressions] == ["t10"]
    assert listed.regressions[0] == {
        "task_id": "t10",
        "best": 1.0,
        "candidate": 0.25,
        "drop": 0.75,
        "noise": 0.5,
    }
    vetoed = judge(cand, best, gate.GateConfig(veto_regressions=True))
    assert (vetoed.decision, vetoed.basis) == (REJECT, "regression_veto")
    assert "1 task(s)" in vetoed.reason and "t10" in vetoed.reason


def test_no_regression_no_veto():
    cand, best = veto_arms()
    cand[10] = [1, 1, 0, 0]  # t10 now drops within its noise too
    verdict = judge(cand, best, gate.GateConfig(veto_regressions=True))
    assert verdict.regressions == [] and (verdict.decision, verdict.basis) == (ACCEPT, "exact")


def test_veto_never_turns_a_reject_into_anything_else():
    cand, best = veto_arms()
    cand[3:10] = 0  # only three tasks improve now: rejected by the test
    verdict = judge(cand, best, gate.GateConfig(veto_regressions=True))
    assert verdict.regressions and (verdict.decision, verdict.basis) == (REJECT, "exact")


def test_a_regression_needs_a_task_the_best_passed():
    # t0 drops 0.9 → 0 with no noise; it is a regression only if the best "passed" it
    cand = np.array([[0.0, 0.0]] + [[1.0, 1.0]] * 6)
    best = np.array([[0.9, 0.9]] + [[0.0, 0.0]] * 6)
    ids = [f"t{i}" for i in range(7)]
    assert gate.regressions(cand, best, ids, success_threshold=1.0) == []
    assert [r["task_id"] for r in gate.regressions(cand, best, ids, success_threshold=0.9)] == ["t0"]
    # "passed" means at least half of the best's trials reached the threshold
    half = np.array([[1.0, 0.0]] + [[0.0, 0.0]] * 6)
    assert [r["task_id"] for r in gate.regressions(np.zeros((7, 2)), half, ids, 1.0)] == []  # 0.5 ≤ noise
    assert [r["task_id"] for r in gate.regressions(np.zeros((7, 1)), half[:, :1], ids, 1.0)] == ["t0"]


def test_a_constant_drop_is_a_regression_however_small():
    verdict = judge(np.array([[0.5, 0.5]] * 3), np.ones((3, 2)))
    assert [r["task_id"] for r in verdict.regressions] == ["t0", "t1", "t2"]
    assert all(r["noise"] == 0.0 and r["drop"] == 0.5 for r in verdict.regressions)


# -- order of the rules ---------------------------------------------------------------------------


def test_coverage_is_decided_before_any_statistic():
    cand, best = moved(10, n=20)
    cand[10:] = np.nan
    verdict = judge(cand, best, null_deltas=[0.9], infra_errors={"candidate": 10, "best": 0})
    assert (verdict.decision, verdict.basis) == (INDECISIVE, "coverage")
    assert verdict.p_value is None and verdict.ci is None


# -- gating on val only ---------------------------------------------------------------------------


@pytest.mark.parametrize("split", ["train", "test", "VAL", ""])
def test_the_gate_refuses_every_split_but_val(split):
    with pytest.raises(gate.GateSplitError, match=f"refusing to gate on {split!r}"):
        judge(*moved(5), split=split)
    assert judge(*moved(5), split="val").split == "val"


def test_evidence_judges_on_val(val_rollout):
    records = [
        val_rollout(tag, f"t{i}", 0, reward)
        for i in range(6)
        for tag, reward in (("cand", 1.0), ("best", 0.0))
    ]
    ev = judging.Evidence(evidence.index_records(records), [f"t{i}" for i in range(6)], 1, lambda tag: 1)
    verdict = ev.judge("cand", "best", gate.GateConfig())
    assert judging.GATE_SPLIT == "val"
    assert verdict.split == "val" and verdict.decision == ACCEPT and verdict.n_tasks == 6


# -- rules that live in session code --------------------------------------------------------------
