"""The gate's decide (decide/gate.py) at the numbers and branches the honesty-rule tests do not
reach: the legacy cap-evolve modes and their reasons and bars, the verdict record, off-grid and
near-α decisions, imputation, coverage, the veto's reason, the stability check and "directionally
positive". Expected values are worked out by hand (or by brute force in the test), never copied
from a run; each test was written to kill a mutant (``python benchmarks/mutation.py``)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from gate_calls import decide

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import gate
from pytest_capevolve._decide.verdict import ACCEPT, REJECT, GateConfig
from pytest_capevolve._stats import sign_flip

INDECISIVE = gate.INDECISIVE


ANY_COVERAGE = gate.GateConfig(min_coverage=0.0)


def judge(candidate, best, config=ANY_COVERAGE, **kw):
    candidate, best = np.asarray(candidate, float), np.asarray(best, float)
    ids = [f"t{i}" for i in range(len(candidate))]
    return gate.decide(candidate, best, tag="cand", against="best", task_ids=ids, config=config, **kw)


OFF_GRID = math.pi / 10  # no grid up to GRID_MAX holds it


FLIPPABLE = (np.array([[1, np.nan, np.nan]] * 5, float), np.array([[0, 1, 1]] * 5, float))


F = Fraction


def ups(n: int, lift: float = 1.0):
    """n tasks, each +lift (candidate lift, best 0)."""
    return [lift] * n, [0.0] * n


def test_off_grid_few_tasks_are_enumerated_exactly():
    cand = np.array([[OFF_GRID]] * 5 + [[0.0]] * 3)
    verdict = judge(cand, np.zeros((8, 1)))
    assert (verdict.p_exact, verdict.p_method, verdict.decision) == ("1/32", "exact", ACCEPT)
    worse = judge(np.array([[OFF_GRID]] * 4 + [[0.0]]), np.array([[0.0]] * 4 + [[OFF_GRID]]))
    assert Fraction(worse.p_exact) == Fraction(6, 32) and worse.decision == REJECT


def test_sign_flip_test_routes_off_grid_rewards_to_monte_carlo():
    cand = np.full((20, 1), OFF_GRID)
    result = stats.sign_flip_test(cand, np.zeros((20, 1)), n_resamples=999, seed=1)
    assert (result.method, result.denominator, result.numerator) == ("monte_carlo", 1000, 1)
    verdict = judge(cand, np.zeros((20, 1)))
    assert verdict.p_method == "monte_carlo" and verdict.decision == ACCEPT


def test_many_tasks_near_alpha_are_decided_by_exact_counts():
    # 2,000 tasks moved by one step: the float tail away from α (reported as the upper bound it
    # is, and named), exact counts near it
    deltas = [1] * 1030 + [-1] * 970
    cand = np.array([[1.0 if d > 0 else 0.0] for d in deltas])
    best = 1.0 - cand
    exact = Fraction(sign_flip._count_at_least([1] * 2000, 60), 2**2000)
    far = stats.sign_flip_test(cand, best, alpha=0.5)
    assert (far.method, far.denominator) == ("float_tail", 1 << 53)
    assert exact <= far.fraction <= exact + Fraction(2 * stats.EXACT_MARGIN)  # an upper bound
    near = stats.sign_flip_test(cand, best, alpha=float(exact))
    assert near.fraction == exact and (near.method, near.denominator) == ("exact", 2**2000)
    none = stats.sign_flip_test(cand, best)  # no α given: the float tail decides
    assert none.method == "float_tail"
    assert Fraction(judge(cand, best, gate.GateConfig(alpha=float(exact), min_coverage=0.0)).p_exact) == exact
    small = [[1.0]] * 60
    assert stats.sign_flip_test(np.array(small), np.zeros((60, 1)), alpha=0.5).denominator == 2**60


def test_significant_mode_compares_arm_means_with_k_combined_se():
    cand = np.array([[1, 1], [1, 0], [0, 0], [1, 1]], float)
    best = np.array([[0, 0], [1, 0], [0, 0], [1, 0]], float)
    se = math.sqrt(stats.combined_se(cand) ** 2 + stats.combined_se(best) ** 2)
    delta = 0.625 - 0.25
    config = gate.GateConfig(mode="significant", k_se=delta / se * 0.99, min_coverage=0.0)
    verdict = judge(cand, best, config)
    assert (verdict.decision, verdict.basis) == (ACCEPT, "significant")
    assert verdict.se == pytest.approx(se) and verdict.bar == pytest.approx(config.k_se * se)
    assert verdict.k_se == config.k_se and verdict.alpha is None
    higher = gate.GateConfig(mode="significant", k_se=delta / se * 1.01, min_coverage=0.0)
    assert judge(cand, best, higher).decision == REJECT


def test_k_se_rules_fall_back_to_strict_with_a_warning_when_se_is_zero():
    paired = gate.GateConfig(mode="paired", k_se=5.0, min_coverage=0.0)
    one = judge([[1.0]], [[0.0]], paired)  # one task: SE undefined, treated as 0
    assert (one.decision, one.bar, one.se) == (ACCEPT, 0.0, 0.0)
    assert one.warnings == ["paired SE = 0: strict fallback"] and "fell back to strict" in one.reason
    same = judge([[1.0], [1.0]], [[0.0], [0.0]], paired)  # equal deltas: SE = 0
    assert same.decision == ACCEPT and same.warnings
    assert judge([[0.0]], [[0.0]], paired).decision == REJECT
    sig = judge(np.ones((3, 2)), np.zeros((3, 2)), gate.GateConfig(mode="significant", min_coverage=0.0))
    assert sig.decision == ACCEPT and sig.warnings == ["significant SE = 0: strict fallback"]


def test_paired_mode_bar_is_k_times_se():
    deltas = [1, 1, 0, 1, -1, 1]
    cand = np.array([[1.0 if d > 0 else 0.0] for d in deltas])
    best = np.array([[1.0 if d < 0 else 0.0] for d in deltas])
    mean, se = np.mean(deltas), np.std(deltas, ddof=1) / math.sqrt(6)
    at = judge(cand, best, gate.GateConfig(mode="paired", k_se=mean / se * 0.999, min_coverage=0.0))
    above = judge(cand, best, gate.GateConfig(mode="paired", k_se=mean / se * 1.001, min_coverage=0.0))
    assert at.decision == ACCEPT and above.decision == REJECT
    assert above.bar == pytest.approx(mean * 1.001) and above.k_se == pytest.approx(mean / se * 1.001)
    assert "paired Δ̄ = +0.5000 ≤" in above.reason


def test_threshold_and_strict_modes():
    cand, best = np.array([[1.0], [0.5]]), np.array([[0.5], [0.5]])  # Δ = +0.25
    for threshold, decision in ((0.2, ACCEPT), (0.25, REJECT), (0.3, REJECT)):
        config = gate.GateConfig(mode="threshold", threshold=threshold, min_coverage=0.0)
        verdict = judge(cand, best, config)
        assert (verdict.decision, verdict.basis, verdict.bar) == (decision, "threshold", threshold)
    strict = gate.GateConfig(mode="strict", min_coverage=0.0)
    assert judge(cand, best, strict).decision == ACCEPT
    assert judge(best, best, strict).decision == REJECT and judge(best, best, strict).bar == 0.0


def test_simplicity_tiebreak_prefers_the_smaller_candidate_only_on_a_tie():
    config = gate.GateConfig(mode="simplicity_tiebreak", min_coverage=0.0)
    tie = (np.array([[1.0], [0.0]]), np.array([[0.0], [1.0]]))
    assert judge(*tie, config, candidate_size=10, best_size=11).decision == ACCEPT
    assert judge(*tie, config, candidate_size=11, best_size=11).decision == REJECT
    assert judge(*tie, config, candidate_size=10).decision == REJECT
    assert judge(*tie, config, best_size=11).decision == REJECT
    better = judge([[1.0], [0.5]], [[0.5], [0.5]], config, candidate_size=99, best_size=1)
    assert better.decision == ACCEPT
    worse = judge([[0.5], [0.5]], [[1.0], [0.5]], config, candidate_size=1, best_size=99)
    assert worse.decision == REJECT


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown gate mode 'bogus'"):
        judge([[1.0]], [[0.0]], gate.GateConfig(mode="bogus"))


def test_a_verdict_carries_every_number_it_was_decided_on():
    cand = np.array([[1, 1], [1, np.nan], [0, 0], [1, 0]], float)
    best = np.array([[0, 0], [0, 0], [0, 0], [0, 1]], float)
    v = judge(cand, best, infra_errors={"candidate": 1, "best": 1})
    assert (v.n_tasks, v.trials, v.delta_mean) == (4, 2, 0.5)
    assert v.se == pytest.approx(np.std([1, 1, 0, 0], ddof=1) / 2)
    assert v.footprint == ["t0", "t1"] and v.infra_errors == {"candidate": 1, "best": 1}
    assert v.per_task["t1"] == {"candidate": 1.0, "best": 0.0, "delta": 1.0}
    assert v.per_task["t3"] == {"candidate": 0.5, "best": 0.5, "delta": 0.0}
    assert v.coverage == {"candidate": 1.0, "best": 1.0, "paired": 1.0} and v.min_coverage == 0.0
    assert v.ci is not None and v.ci[0] <= 0.5 <= v.ci[1]
    assert v.split == "val" and v.tag == "cand" and v.against == "best"
    assert v.to_dict()["p_exact"] == v.p_exact == "1/4"
    assert judge(cand, best).infra_errors == {"candidate": 0, "best": 0}
    missing = judge(np.array([[np.nan], [1.0]]), np.array([[0.0], [0.0]]))
    assert missing.per_task["t0"] == {"candidate": None, "best": 0.0, "delta": None}
    assert judge(np.ones(3), np.zeros(3)).trials == 1


def test_off_grid_decisions_use_the_configured_seed():
    rng = np.random.default_rng(2)
    cand = rng.random((24, 1)) * 0.5 + 0.3
    best = rng.random((24, 1)) * 0.5 + 0.25
    for seed in (3, 5):
        verdict = judge(cand, best, gate.GateConfig(seed=seed, min_coverage=0.0))
        expected = stats.sign_flip_test(cand, best, seed=seed)
        assert verdict.p_method == "monte_carlo" and verdict.p_value == expected.p_value
    assert (
        stats.sign_flip_test(cand, best, seed=3).p_value != stats.sign_flip_test(cand, best, seed=5).p_value
    )


def test_k_se_rule_reasons_and_its_strict_bar():
    paired = gate.GateConfig(mode="paired", k_se=1.0, min_coverage=0.0)
    at_bar = judge([[1.0], [0.0]], [[0.0], [0.0]], paired)  # Δ̄ = 0.5 = 1·SE exactly
    assert (
        at_bar.bar == 0.5
        and at_bar.decision == REJECT
        and "paired Δ̄ = +0.5000 ≤ 1.0·SE = 0.5000" in at_bar.reason
    )
    over = judge([[1.0], [0.0]], [[0.0], [0.0]], gate.GateConfig(mode="paired", k_se=0.9, min_coverage=0.0))
    assert (
        over.decision == ACCEPT
        and "+0.5000 > 0.9·SE = 0.4500 (SE = 0.5000, n = 2; decided on exact" in over.reason
    )
    assert "= +1.0000 > 0 (WARNING: SE = 0" in judge([[1.0]], [[0.0]], paired).reason
    assert "= +0.0000 ≤ 0 (WARNING: SE = 0" in judge([[0.0]], [[0.0]], paired).reason


def test_imputation_fills_the_best_as_fails_against_a_reject():
    # rejected (Δ̄ = 0); the best's missing trials as fails would make Δ̄ = +2/3 on 5 tasks
    cand = np.ones((5, 3))
    best = np.array([[1, np.nan, np.nan]] * 5, float)
    assert judge(cand, best).decision == REJECT
    verdict = judge(cand, best, infra_errors={"candidate": 0, "best": 10})
    assert (verdict.decision, verdict.basis) == (INDECISIVE, "error_imbalance")


def test_trials_paid_again_after_an_infra_error_are_imputed_against_an_accept_only():
    """Red team (issue 37, class 3): candidate code that raised on each failing draw had those
    trials paid again, and its redraws were all passes; the imbalance check saw no trial missing.
    Its first attempts (the redrawn trials missing) flip the accept; a reject stands as paid."""
    cand = np.ones((20, 3))
    best = np.array([[1.0, 0.0, 0.0]] * 20)
    first = cand.copy()
    first[:, 1:] = np.nan  # two of three trials of each task were errors first, then redrawn
    assert judge(cand, best).decision == ACCEPT
    verdict = judge(cand, best, infra_errors={"candidate": 40, "best": 0}, first_attempts=(first, best))
    assert (verdict.decision, verdict.basis) == (INDECISIVE, "error_imbalance")
    assert "paid again after an infra error" in verdict.reason
    # the same redraws behind a reject change nothing: they could only have favoured the candidate
    assert (
        judge(best, cand, infra_errors={"candidate": 40, "best": 0}, first_attempts=(first, cand)).decision
        == REJECT
    )


def test_imputation_of_a_single_task_can_flip_a_legacy_rule():
    strict = gate.GateConfig(mode="strict", min_coverage=0.0)
    cand, best = np.array([[0.0, np.nan]]), np.array([[0.0, 0.0]])
    assert judge(cand, best, strict).decision == REJECT
    verdict = judge(cand, best, strict, infra_errors={"candidate": 1, "best": 0})
    assert (verdict.decision, verdict.basis) == (INDECISIVE, "error_imbalance")


def test_imputation_reruns_the_rule_with_the_candidates_sizes():
    # simplicity_tiebreak: Δ = −0.5 now; the candidate's missing trial as a pass makes a tie the
    # smaller candidate would win, so the imbalance could flip the decision
    config = gate.GateConfig(mode="simplicity_tiebreak", min_coverage=0.0)
    cand, best = np.array([[0.0, np.nan]]), np.array([[0.5, 0.5]])
    sizes = {"candidate_size": 1, "best_size": 2}
    assert judge(cand, best, config, **sizes).decision == REJECT
    verdict = judge(cand, best, config, infra_errors={"candidate": 1, "best": 0}, **sizes)
    assert verdict.decision == INDECISIVE


def test_decide_refuses_task_ids_that_do_not_match_the_tasks():
    for ids in (["a", "b"], ["a", "b", "c", "d"]):
        with pytest.raises(ValueError, match="zip"):
            gate.decide(
                np.ones((3, 1)), np.zeros((3, 1)), tag="c", against="b", task_ids=ids, config=ANY_COVERAGE
            )


def test_no_tasks_at_all_is_zero_coverage():
    empty = gate.decide(
        np.empty((0, 2)), np.empty((0, 2)), tag="c", against="b", task_ids=[], config=ANY_COVERAGE
    )
    assert empty.coverage == {"candidate": 0.0, "best": 0.0, "paired": 0.0}
    assert empty.reason.startswith(
        "no task is valid on both sides: paired coverage 0% is below min_coverage 0%"
    )


def test_coverage_reason_gives_the_paired_share():
    cand = np.ones((10, 1))
    cand[:3] = np.nan
    verdict = judge(cand, np.zeros((10, 1)), gate.GateConfig())
    assert verdict.reason == "paired coverage 70% is below min_coverage 80%: could not judge"


def test_k_se_is_recorded_only_for_k_se_modes():
    assert judge(np.ones((3, 1)), np.zeros((3, 1))).k_se is None
    assert judge(np.ones((3, 1)), np.zeros((3, 1)), gate.GateConfig(mode="strict")).k_se is None
    assert judge(np.ones((3, 1)), np.zeros((3, 1)), gate.GateConfig(mode="paired", k_se=0.7)).k_se == 0.7


def test_the_confidence_interval_is_students_t_at_every_size():
    # 12 tasks (tau2's val) and 300 (where a bootstrap was once used): the same t interval of the deltas
    rng = np.random.default_rng(3)
    for n in (12, 300):
        deltas = np.round(rng.uniform(-0.4, 1.0, n), 1)
        cand = np.clip(deltas, 0, 1)[:, None]
        best = np.clip(-deltas, 0, 1)[:, None]
        verdict = judge(cand, best, gate.GateConfig(min_coverage=0.0))
        assert verdict.ci == pytest.approx(list(stats.t_ci(deltas)), rel=1e-12)
        assert verdict.ci_method == stats.STUDENT_T == verdict.to_dict()["ci_method"]


def test_regression_noise_uses_both_arms_squared_errors():
    # best [1,1,1,0] (SE 0.25), candidate constant 0.25: drop 0.5 = noise 2·0.25, not above it
    cand, best = np.full((1, 4), 0.25), np.array([[1.0, 1.0, 1.0, 0.0]])
    assert gate.regressions(cand, best, ["t0"], 1.0) == []
    assert [r["task_id"] for r in gate.regressions(np.zeros((1, 4)), best, ["t0"], 1.0)] == ["t0"]


def test_the_best_passed_a_task_when_at_least_half_its_trials_did():
    cand = np.zeros((1, 2))
    half = np.array([[1.0, 0.5]])  # 1 of 2 at the threshold: passed; drop 0.75 > noise 0.5
    assert [r["task_id"] for r in gate.regressions(cand, half, ["t0"], 1.0)] == ["t0"]
    third = np.array([[0.9, 0.5, 0.5]])  # 1 of 3 at 0.9: not passed, though drop > noise
    assert gate.regressions(np.zeros((1, 3)), third, ["t0"], 0.9) == []


def test_passing_is_judged_per_task_not_over_the_arm():
    best = np.array([[0.9, 0.9]] + [[1.0, 1.0]] * 5)  # t0 failed by the best; the others passed
    cand = np.array([[0.0, 0.0]] + [[1.0, 1.0]] * 5)
    assert gate.regressions(cand, best, [f"t{i}" for i in range(6)], 1.0) == []


def test_a_simpler_tie_still_meets_the_null_floor():
    config = gate.GateConfig(mode="simplicity_tiebreak", min_coverage=0.0)
    tie = (np.array([[1.0], [0.0]]), np.array([[0.0], [1.0]]))
    assert judge(*tie, config, candidate_size=1, best_size=2).decision == ACCEPT
    floored = judge(*tie, config, candidate_size=1, best_size=2, null_deltas=[0.5])
    assert (floored.decision, floored.basis) == (REJECT, "null_floor")


def test_the_veto_reason_names_at_most_five_tasks():
    cand = np.array([[0.0, 0.0]] * 6 + [[1.0, 1.0]] * 20)
    best = np.array([[1.0, 1.0]] * 6 + [[0.0, 0.0]] * 20)
    verdict = judge(cand, best, gate.GateConfig(veto_regressions=True, min_coverage=0.0))
    assert verdict.basis == "regression_veto" and len(verdict.regressions) == 6
    assert verdict.reason.endswith("noise (t0, t1, t2, t3, t4)") and verdict.reason.startswith(
        "vetoed: 6 task(s)"
    )


@pytest.mark.parametrize(
    "infra, shown",
    [
        ({"candidate": 10}, "(10 vs 0)"),
        ({"best": 10}, "(0 vs 10)"),
        ({"candidate": 0, "best": 10}, "(0 vs 10)"),
    ],
)
def test_a_missing_infra_count_is_zero(infra, shown):
    cand, best = FLIPPABLE if "candidate" in infra and infra["candidate"] else FLIPPABLE[::-1]
    verdict = judge(cand, best, infra_errors=infra)
    assert verdict.basis == "error_imbalance" and shown in verdict.reason


def test_no_count_for_either_arm_is_no_imbalance():
    assert judge(*FLIPPABLE, infra_errors={"best": 0}).decision == ACCEPT
    assert judge(*FLIPPABLE, infra_errors={"candidate": 0}).decision == ACCEPT


def test_legacy_reasons_bases_and_bars():
    up, down = (
        (np.array([[1.0], [0.5]]), np.array([[0.5], [0.5]])),
        (np.array([[0.5], [0.5]]), np.array([[1.0], [0.5]])),
    )
    threshold = gate.GateConfig(mode="threshold", threshold=0.1, min_coverage=0.0)
    assert judge(*up, threshold).reason == "Δ = +0.2500 > threshold 0.1"
    assert judge(*down, threshold).reason == "Δ = -0.2500 ≤ threshold 0.1"
    strict = gate.GateConfig(mode="strict", min_coverage=0.0)
    s_up, s_down = judge(*up, strict), judge(*down, strict)
    assert (s_up.basis, s_up.bar, s_up.reason) == ("strict", 0.0, "Δ = +0.2500 > 0")
    assert (s_down.basis, s_down.reason) == ("strict", "Δ = -0.2500 ≤ 0")
    simple = gate.GateConfig(mode="simplicity_tiebreak", min_coverage=0.0)
    for arms, sizes in ((up, {}), (down, {}), ((up[1], up[1]), {"candidate_size": 1, "best_size": 2})):
        verdict = judge(*arms, simple, **sizes)
        assert verdict.basis == "simplicity_tiebreak" and verdict.bar == 0.0
    significant = judge(*up, gate.GateConfig(mode="significant", k_se=0.1, min_coverage=0.0))
    assert (
        significant.reason.startswith("Δ = +0.2500 > 0.1·SE = ") and "(combined SE = " in significant.reason
    )
    with pytest.raises(
        ValueError, match="use one of exact, paired, significant, strict, threshold, simplicity_tiebreak"
    ):
        judge(*up, gate.GateConfig(mode="nope"))


def test_a_tie_is_within_one_billionth():
    simple = gate.GateConfig(mode="simplicity_tiebreak", min_coverage=0.0)
    cand, best = np.array([[0.0]]), np.array([[1e-9]])
    assert judge(cand, best, simple, candidate_size=1, best_size=2).decision == ACCEPT
    assert judge(cand, np.array([[2e-9]]), simple, candidate_size=1, best_size=2).decision == REJECT


def test_a_decision_that_flips_when_one_task_is_left_out_is_not_stable():
    # 5 tasks each +1: p = 1/32 ≤ 0.05, accepted; any 4 give p = 1/16 > 0.05, rejected
    verdict = decide(*ups(5))
    assert verdict.decision == ACCEPT and verdict.p_exact == "1/32"
    assert verdict.verdict_stable is False


def test_a_decision_that_holds_with_any_task_left_out_is_stable():
    # 7 tasks each +1: p = 1/128; any 6 give 1/64 ≤ 0.05, still accepted
    verdict = decide(*ups(7))
    assert verdict.decision == ACCEPT and verdict.verdict_stable is True


def test_the_null_floor_is_applied_inside_the_stability_check():
    # 7 tasks each +1, null spread exactly 1: Δ̄ = 1 does not exceed it, so rejected; any 6
    # give Δ̄ = 1 again, which the rule accepts and the floor rejects: stable
    floored = decide(*ups(7), null_deltas=[1.0])
    assert (floored.decision, floored.basis, floored.verdict_stable) == (REJECT, "null_floor", True)
    # a spread of 0.5 is exceeded by Δ̄ = 1 with or without any one task: accepted, stable
    above = decide(*ups(7), null_deltas=[-0.5])
    assert (above.decision, above.verdict_stable) == (ACCEPT, True)


def test_every_kind_of_task_is_tried_not_only_the_first():
    # strict: arm Δ = (0.5 + 1)/2 − (0.5 + 0)/2 = 0.5 > 0, accepted; without t1 the Δ is 0
    verdict = decide([0.5, 1.0], [0.5, 0.0], GateConfig(mode="strict", min_coverage=0.0))
    assert verdict.decision == ACCEPT and verdict.verdict_stable is False


def test_leaving_out_the_only_task_is_not_stable():
    verdict = decide([1.0], [0.0], GateConfig(mode="strict", min_coverage=0.0))
    assert verdict.decision == ACCEPT and verdict.verdict_stable is False


def test_the_stability_check_reruns_the_rule_with_the_snapshot_sizes():
    # a tie (Δ = 0) that the smaller candidate wins; with any task left out it is still a tie
    config = GateConfig(mode="simplicity_tiebreak", min_coverage=0.0)
    verdict = decide([0.5] * 3, [0.5] * 3, config, candidate_size=10, best_size=11)
    assert verdict.decision == ACCEPT and verdict.verdict_stable is True
    assert verdict.reason == "tie (Δ = +0.0000); the smaller candidate wins (10 < 11 bytes)"


def test_tasks_valid_on_one_side_only_are_never_left_out():
    # t0 candidate only, t1 best only, t2 and t3 paired ties. threshold 0.2 on the arm Δ:
    # (1 + .5 + .5)/3 − (0 + .5 + .5)/3 = 1/3 > 0.2, accepted. Leaving out a paired tie:
    # (1 + .5)/2 − (0 + .5)/2 = 0.5, still accepted: stable. (Leaving out t0 would give
    # .5 − 1/3 = 1/6 and t1 2/3 − .5 = 1/6, both ≤ 0.2: neither is tried.)
    config = GateConfig(mode="threshold", threshold=0.2, min_coverage=0.0)
    verdict = decide([1.0, np.nan, 0.5, 0.5], [np.nan, 0.0, 0.5, 0.5], config)
    assert verdict.decision == ACCEPT and verdict.verdict_stable is True


def test_stability_is_computed_for_up_to_64_kinds_of_task_and_not_beyond():
    config = GateConfig(mode="strict", min_coverage=0.0)
    # candidate i/100 against 0: every task its own kind; Δ > 0 with any one left out
    assert decide([i / 100 for i in range(64)], [0.0] * 64, config).verdict_stable is True
    assert decide([i / 100 for i in range(65)], [0.0] * 65, config).verdict_stable is None
    # many tasks but two kinds: computed
    assert decide([1.0, 0.5] * 50, [0.0] * 100, config).verdict_stable is True


def test_the_null_floor_bar_keeps_a_higher_rule_bar():
    # threshold 0.2 on the arm Δ: t0 is the candidate's only (1.0), t1 a paired tie (0.5):
    # arm Δ = 0.75 − 0.5 = 0.25 > 0.2, accepted at bar 0.2. The paired Δ̄ = 0 does not exceed
    # the null spread 0.1: rejected by the floor, and the bar is max(0.2, 0.1) = 0.2
    config = GateConfig(mode="threshold", threshold=0.2, min_coverage=0.0)
    verdict = decide([1.0, 0.5], [np.nan, 0.5], config, null_deltas=[0.1])
    assert (verdict.decision, verdict.basis, verdict.bar) == (REJECT, "null_floor", 0.2)


def test_directionally_positive_means_a_positive_mean_that_was_not_accepted():
    assert decide(*ups(4)).directionally_positive_but_inconclusive is True  # p = 1/16: rejected
    assert decide(*ups(4, 0.5)).directionally_positive_but_inconclusive is True  # Δ̄ = 0.5 < 1
    assert decide(*ups(5)).directionally_positive_but_inconclusive is False  # accepted
    tie = decide([0.5] * 4, [0.5] * 4)  # Δ̄ = 0 exactly: not positive
    assert tie.decision == REJECT and tie.directionally_positive_but_inconclusive is False
    worse = decide([0.0] * 4, [1.0] * 4)
    assert worse.decision == REJECT and worse.directionally_positive_but_inconclusive is False


def test_alpha_text_is_a_plain_decimal_never_a_fraction_read_as_tasks():
    assert gate.alpha_text(0.05) == "0.05"
    plain = {1: "1", 2: "0.5", 4: "0.25", 5: "0.2", 10: "0.1", 20: "0.05", 25: "0.04"}
    plain |= {40: "0.025", 50: "0.02", 60: "0.01667", 100: "0.01", 1000: "0.001", 3: "0.3333"}
    plain |= {6: "0.1667", 11: "0.09091", 21: "0.04762", 101: "0.009901", 1001: "0.000999"}
    assert {d: gate.alpha_text(F(1, d)) for d in plain} == plain


def test_a_margin_asks_no_worse_than_and_the_null_floor_is_cleared_by_delta_less_the_margin():
    """Δ̄ = −0.01 over 400 tasks: not better, but no worse than −0.05; the nulls' spread must be
    below Δ̄ − δ = 0.04 (the bar is δ + spread), and a margin leaves a plain gate as it was."""
    best = np.tile([1.0, 0.0], 200)
    candidate = best.copy()
    candidate[[0, 2, 4, 6]] = 0.0
    margin = GateConfig(mode="exact", alpha=0.05, min_coverage=0.0, margin=-0.05)
    assert decide(candidate, best).decision == REJECT
    accepted = decide(candidate, best, margin, null_deltas=["3/100"])
    assert accepted.decision == ACCEPT and accepted.basis == "non_inferiority"
    assert accepted.bar == pytest.approx(-0.02) and accepted.margin is not None
    assert accepted.margin["lower"] > -0.05 and accepted.p_value <= 0.05
    floored = decide(candidate, best, margin, null_deltas=["1/20"])  # Δ̄ − δ = 0.04 ≤ 0.05
    assert floored.decision == REJECT and floored.basis == "null_floor" and "margin -0.05" in floored.reason
    assert decide(candidate, best, margin, null_deltas=["39/1000"]).decision == ACCEPT  # just below
    assert decide(candidate, best, margin, null_deltas=["1/25"]).decision == REJECT  # a tie: no accept
