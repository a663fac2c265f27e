"""Tests that kill mutants of the decision and statistics code (``python benchmarks/mutation.py``).

Each test pins a number or a branch the honesty-rule tests do not reach: the off-grid Monte
Carlo path, the float fast path near α, the legacy cap-evolve modes, the estimators behind the
report, and the glue that turns persisted rollouts into verdicts. Expected values are worked
out by hand (or by brute force in the test), never copied from a run.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import gate
from pytest_capevolve._decide import verdict as verdict_types
from pytest_capevolve._policy import verdicts as judging
from pytest_capevolve._project.spec import Spec
from pytest_capevolve._stats import core
from pytest_capevolve._store import evidence
from pytest_capevolve._store.rundir import RunDir

ACCEPT, REJECT, INDECISIVE = gate.ACCEPT, gate.REJECT, gate.INDECISIVE


ANY_COVERAGE = gate.GateConfig(min_coverage=0.0)


def judge(candidate, best, config=ANY_COVERAGE, **kw):
    candidate, best = np.asarray(candidate, float), np.asarray(best, float)
    ids = [f"t{i}" for i in range(len(candidate))]
    return gate.decide(candidate, best, tag="cand", against="best", task_ids=ids, config=config, **kw)


def exact_tail(deltas) -> float:
    """P(Σ s_i |d_i| ≥ Σ d_i) over all 2^N sign patterns, enumerated (ties to the candidate's loss)."""
    deltas = np.asarray([d for d in deltas if d != 0], float)
    if deltas.size == 0:
        return 1.0
    signs = np.array(list(itertools.product((1, -1), repeat=deltas.size)))
    return float(np.mean(signs @ np.abs(deltas) >= deltas.sum() - 1e-12 * np.abs(deltas).sum()))


# -- off-grid rewards: enumeration up to 16 tasks, seeded Monte Carlo beyond ----------------------

OFF_GRID = math.pi / 10  # no grid up to GRID_MAX holds it


def test_off_grid_rewards_are_recognised():
    assert stats.reward_grid(np.array([[0.0, 0.5, 1.0]])) == 2
    assert stats.reward_grid(np.array([[0.25, 1.0]]), np.array([[0.2]])) == 20
    assert stats.reward_grid(np.array([[OFF_GRID]])) is None
    assert (
        stats.reward_grid(np.array([[1 / 1000]])) == 1000
        and stats.reward_grid(np.array([[1 / 1001]])) is None
    )
    assert stats.reward_grid(np.array([[np.nan, 1.0]])) == 1


def test_off_grid_few_tasks_are_enumerated_exactly():
    cand = np.array([[OFF_GRID]] * 5 + [[0.0]] * 3)
    verdict = judge(cand, np.zeros((8, 1)))
    assert (verdict.p_exact, verdict.p_method, verdict.decision) == ("1/32", "exact", ACCEPT)
    worse = judge(np.array([[OFF_GRID]] * 4 + [[0.0]]), np.array([[0.0]] * 4 + [[OFF_GRID]]))
    assert Fraction(worse.p_exact) == Fraction(6, 32) and worse.decision == REJECT


def test_off_grid_ties_count_against_the_candidate():
    # d = (a, b, −(a + b)): Σ = 0 up to rounding; the patterns summing to ±0 both count
    a, b = 0.1 + OFF_GRID / 100, 0.2 + OFF_GRID / 100
    result = core._monte_carlo(np.array([a, b, -(a + b)]), 100, 0)
    assert (result.numerator, result.denominator, result.method) == (5, 8, "exact")
    assert core._monte_carlo(np.array([0.0, 0.0]), 100, 0) == stats.SignFlipResult(1.0, "exact", 1, 1)


def test_off_grid_many_tasks_use_seeded_monte_carlo_with_the_plus_one_correction():
    rng = np.random.default_rng(7)
    deltas = rng.choice([-1, 1], size=18) * (OFF_GRID + rng.random(18) / 10)
    truth = exact_tail(deltas)
    mc = core._monte_carlo(deltas, 2500, 3)  # two chunks: 2000 + 500 draws
    assert mc.method == "monte_carlo" and mc.denominator == 2501
    assert 1 <= mc.numerator <= 2501 and mc.p_value == mc.numerator / 2501
    assert abs(mc.p_value - truth) < 4 * math.sqrt(truth * (1 - truth) / 2500) + 1 / 2501
    assert core._monte_carlo(deltas, 2500, 3) == mc  # seeded: the same draws every time
    assert core._monte_carlo(deltas, 2500, 4) != mc
    top = core._monte_carlo(np.abs(deltas), 2000, 0)  # every delta positive: only one pattern reaches it
    assert (top.numerator, top.denominator) == (1, 2001)
    assert 0 < top.p_value < 1 / 2000


def test_sign_flip_test_routes_off_grid_rewards_to_monte_carlo():
    cand = np.full((20, 1), OFF_GRID)
    result = stats.sign_flip_test(cand, np.zeros((20, 1)), n_resamples=999, seed=1)
    assert (result.method, result.denominator, result.numerator) == ("monte_carlo", 1000, 1)
    verdict = judge(cand, np.zeros((20, 1)))
    assert verdict.p_method == "monte_carlo" and verdict.decision == ACCEPT


# -- the exact counter and the float fast path ----------------------------------------------------


@pytest.mark.parametrize("values", [[1], [1, 1], [1, 2, 3], [2, 2, 3, 5], [1, 1, 1, 4, 4, 7]])
def test_count_at_least_equals_enumeration(values):
    for threshold in range(-sum(values) - 1, sum(values) + 2):
        brute = sum(
            1
            for signs in itertools.product((1, -1), repeat=len(values))
            if sum(s * v for s, v in zip(signs, values, strict=True)) >= threshold
        )
        assert core._count_at_least(values, threshold) == brute


def test_float_tail_equals_exact_counts():
    for values, observed in (([1] * 70, 20), ([1, 2, 3] * 25, 40), ([3, 1, 4, 1, 5] * 14, -10)):
        exact = core._count_at_least(values, observed) / 2 ** len(values)
        assert core._float_tail(np.array(values), observed) == pytest.approx(exact, rel=1e-9, abs=1e-15)
    assert core._float_tail(np.array([1, 1]), 3) == 0.0
    assert core._float_tail(np.array([1, 1]), -5) == 1.0


def test_many_tasks_near_alpha_are_decided_by_exact_counts():
    # 61 tasks moved by one step: the float path is used away from α and exact counts near it
    deltas = [1] * 40 + [-1] * 21
    cand = np.array([[1.0 if d > 0 else 0.0] for d in deltas])
    best = 1.0 - cand
    exact = Fraction(core._count_at_least([1] * 61, 19), 2**61)
    far = stats.sign_flip_test(cand, best, alpha=0.5)
    assert far.denominator == 1 << 53 and far.p_value == pytest.approx(float(exact), rel=1e-9)
    near = stats.sign_flip_test(cand, best, alpha=float(exact))
    assert Fraction(near.numerator, near.denominator) == exact and near.denominator == 2**61
    none = stats.sign_flip_test(cand, best)  # no α given: the float path decides
    assert none.denominator == 1 << 53
    assert Fraction(judge(cand, best, gate.GateConfig(alpha=float(exact), min_coverage=0.0)).p_exact) == exact
    small = [[1.0]] * 60
    assert stats.sign_flip_test(np.array(small), np.zeros((60, 1)), alpha=0.5).denominator == 2**60


def test_integer_deltas_use_one_common_scale():
    cand = np.array([[1, 1, 0], [1, np.nan, np.nan], [np.nan, np.nan, np.nan]], float)
    best = np.array([[0, 0, 0], [0.5, 0.5, np.nan], [1, 1, 1]], float)
    # means: 2/3 − 0, 1 − 1/2 (task 3 has no candidate trial); grid 2, lcm(3, 1, 2) = 6 → scale 12
    assert stats.integer_deltas(cand, best, 2) == [8, 6]
    assert stats.integer_deltas(np.full((2, 2), np.nan), np.ones((2, 2)), 1) == []
    huge = stats.integer_deltas(np.array([[1.0] * 61]), np.array([[0.0] * 59 + [np.nan] * 2]), 1)
    assert huge == [math.lcm(61, 59)]


def test_at_most_reads_alpha_as_its_decimal_text():
    result = stats.SignFlipResult(0.05, "exact", 1, 20)
    assert result.at_most(0.05) and not result.at_most(0.0499)
    third = stats.SignFlipResult(1 / 3, "exact", 1, 3)
    assert not third.at_most(0.3333) and third.at_most(0.3334)


# -- estimators -----------------------------------------------------------------------------------


def test_as_matrix_and_check_rewards():
    assert stats.as_matrix([[1.0], [0.0, 1.0]]).tolist()[0][0] == 1.0
    assert np.isnan(stats.as_matrix([[1.0], [0.0, 1.0]])[0, 1])
    assert stats.as_matrix(np.array([1, 0])).shape == (2, 1)
    assert stats.as_matrix([]).shape == (0, 0)
    for bad in (-0.01, 1.01, np.inf, -np.inf):
        with pytest.raises(ValueError, match=r"rewards must lie in \[0, 1\]"):
            stats.check_rewards(np.array([[0.5, bad]]))
    stats.check_rewards(np.array([[0.0, 1.0, np.nan]]))


def test_mean_se_and_task_stderrs():
    assert stats.mean_se(np.array([])) == (None, None)
    assert stats.mean_se(np.array([np.nan, 0.4])) == (0.4, None)
    mean, se = stats.mean_se(np.array([0.0, 1.0, np.nan, 1.0, 1.0]))
    assert mean == 0.75 and se == pytest.approx(0.5 / 2)
    ses = stats.task_stderrs(np.array([[1, 0, 1, 0], [1, np.nan, np.nan, np.nan], [np.nan] * 4]))
    assert ses[0] == pytest.approx(math.sqrt(1 / 3) / 2) and ses[1] == 0.0 and np.isnan(ses[2])


def test_coverage_counts_tasks_with_a_valid_trial():
    assert stats.coverage(np.empty((0, 3))) == 0.0
    assert stats.coverage(np.array([[np.nan, 1], [np.nan, np.nan], [0, 0], [np.nan, 0]])) == 0.75


def test_pass_estimators_skip_short_tasks_and_count_passes_at_half():
    passes = np.array([[1, 1, 0], [1, np.nan, np.nan], [0.5, 0.49, 1]])
    # k = 2: task 1 has one valid trial and is left out; task 3 passes 2 of 3 (0.5 counts, 0.49 not)
    assert stats.pass_hat_k(passes, 2) == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert stats.pass_at_k(passes, 2) == pytest.approx(1.0)
    assert stats.pass_hat_k(passes, 1) == pytest.approx((2 / 3 + 1 + 2 / 3) / 3)
    with pytest.raises(ValueError, match="k must be ≥ 1, got 0"):
        stats.pass_at_k(passes, 0)


def test_combined_se_reproduces_cap_evolve():
    matrix = np.array([[1, 0], [1, 1], [0, 0], [np.nan, np.nan]], float)
    means = np.array([0.5, 1.0, 0.0])
    within = (0.5**2) / (3 * 3)  # task 1's SE is 0.5, the others 0
    between = np.var(means, ddof=1) / 3
    assert stats.combined_se(matrix) == pytest.approx(math.sqrt(between + within))
    assert stats.combined_se(np.array([[1.0, 0.0]])) == pytest.approx(0.5)  # one task: within only
    assert stats.combined_se(np.full((2, 2), np.nan)) == 0.0


def test_variance_components():
    matrix = np.array([[1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0, np.nan], [1, np.nan, np.nan, np.nan]], float)
    within = np.mean([1 / 3, 0.0, 0.0])
    between = max(0.0, np.var([0.5, 1.0, 0.0], ddof=1) - within / np.mean([4, 4, 3]))
    got = stats.variance_components(matrix)
    assert got["within"] == pytest.approx(within) and got["between"] == pytest.approx(between)
    assert got["icc"] == pytest.approx(between / (between + within))
    assert stats.variance_components(np.ones((1, 5))) == {"within": None, "between": None, "icc": None}
    assert stats.variance_components(np.ones((3, 2)))["icc"] is None  # no variance at all
    flat = stats.variance_components(np.array([[1, 0], [0, 1]], float))
    assert flat["between"] == 0.0 and flat["icc"] == 0.0


def test_bootstrap_ci():
    assert stats.bootstrap_ci(np.array([0.3])) is None
    assert stats.bootstrap_ci(np.array([0.2, 0.2, 0.2])) == (0.2, 0.2)
    deltas = np.array([0.0, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, -0.2])
    low, high = stats.bootstrap_ci(deltas, seed=1)
    assert low < deltas.mean() < high and -0.2 <= low and high <= 1.0
    assert stats.bootstrap_ci(deltas, seed=1) == (low, high)
    narrow = stats.bootstrap_ci(deltas, seed=1, confidence=0.5)
    assert low < narrow[0] < narrow[1] < high


# -- legacy cap-evolve modes ----------------------------------------------------------------------


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


# -- the verdict record ---------------------------------------------------------------------------


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


def test_a_refusal_records_no_numbers():
    config = gate.GateConfig(min_coverage=0.7)
    v = verdict_types.refusal(
        tag="c", against="b", decision=INDECISIVE, basis="tamper", reason="r", config=config, details={"x": 1}
    )
    assert (v.tag, v.against, v.decision, v.basis, v.reason, v.details) == (
        "c",
        "b",
        INDECISIVE,
        "tamper",
        "r",
        {"x": 1},
    )
    assert v.n_tasks == 0 and v.p_value is None and v.delta_mean is None and v.min_coverage == 0.7
    assert v.mode == "exact" and v.alpha is None and v.regressions == [] and v.coverage == {}


# -- judging: from persisted rollouts to verdict files --------------------------------------------


def test_gate_config_takes_the_spec_and_the_overrides(tmp_path):
    spec = Spec(
        path=tmp_path / "capevolve.yaml",
        project_dir=tmp_path,
        adapter="a.py:A",
        capability_path=tmp_path,
        base_seed=7,
        success_threshold=0.9,
        gate_mode="paired",
        gate_k_se=0.3,
        gate_alpha=0.01,
        gate_threshold=0.2,
        min_coverage=0.6,
    )
    assert judging.gate_config(spec) == gate.GateConfig(
        mode="paired", alpha=0.01, k_se=0.3, threshold=0.2, min_coverage=0.6, success_threshold=0.9, seed=7
    )
    override = judging.gate_config(spec, mode="exact", k_se=2.0, alpha=0.1, veto_regressions=True)
    assert (override.mode, override.k_se, override.alpha, override.veto_regressions) == (
        "exact",
        2.0,
        0.1,
        True,
    )
    assert judging.gate_config(spec, k_se=0.0, alpha=0.0).k_se == 0.0


def test_evidence_judges_from_records_and_counts_infra_errors(tmp_path, val_rollout):
    record = val_rollout
    rundir = RunDir(tmp_path / "run")
    for tag, size in (("cand", 3), ("best", 5)):
        files = rundir.candidate_dir(tag) / "files"
        files.mkdir(parents=True)
        (files / "prompt.md").write_text("x" * size)
        (files / "sub").mkdir()
        (files / "sub" / "tool.py").write_text("y")
    records = [record("cand", f"t{i}", k, 1.0) for i in range(5) for k in range(2)]
    records += [record("best", f"t{i}", k, 0.0) for i in range(5) for k in range(2) if (i, k) != (4, 1)]
    records += [record("best", "t4", 1, None, infra="timeout"), record("best", "t9", 0, None, infra="x")]
    ids = [f"t{i}" for i in range(5)]
    ev = judging.Evidence(evidence.index_records(records), ids, 2, rundir.snapshot_size)
    assert ev.size("cand") == 4 and ev.size("best") == 6
    assert np.isnan(ev.matrix("best")[4, 1]) and ev.matrix("nobody").shape == (5, 2)
    config = gate.GateConfig(mode="simplicity_tiebreak")
    verdict = ev.judge("cand", "best", config, null_deltas=[0.1])
    assert verdict.infra_errors == {"candidate": 0, "best": 1}
    assert verdict.null_spread == 0.1 and verdict.decision == ACCEPT
    tie = ev.judge("cand", "cand", config)
    assert tie.decision == REJECT  # same size: no simpler tie


def test_null_deltas_and_the_calibration_alarm():
    accepted = judge(np.ones((6, 1)), np.zeros((6, 1)))
    rejected = judge(np.zeros((6, 1)), np.zeros((6, 1)))
    coverage = judge(np.full((6, 1), np.nan), np.zeros((6, 1)))
    assert judging.null_deltas([accepted, rejected, coverage]) == [1.0, 0.0]
    alarm = judging.as_null(accepted)
    assert alarm.decision == ACCEPT and len(alarm.warnings) == 1 and "CALIBRATION ALARM" in alarm.warnings[0]
    assert accepted.warnings == []  # the original verdict is not changed
    assert judging.as_null(rejected) is rejected


def test_write_verdict_writes_the_file_and_logs_the_event(tmp_path):
    rundir = RunDir(tmp_path / "run")
    verdict = judge(np.ones((6, 1)), np.zeros((6, 1)))
    rundir.write_verdict(judging.verdict_file(verdict, null_control=False))
    data = json.loads(rundir.verdict_path("cand").read_text())
    assert data["decision"] == ACCEPT and data["null_control"] is False and data["p_exact"] == "1/64"
    assert data["rollouts"] == "rollouts/val/*__cand__t*.json vs *__best__t*.json"
    event = json.loads(rundir.events_path.read_text().splitlines()[-1])
    assert event["kind"] == "verdict" and event["tag"] == "cand" and event["against"] == "best"
    assert (event["decision"], event["basis"], event["p_value"], event["delta_mean"]) == (
        ACCEPT,
        "exact",
        1 / 64,
        1.0,
    )
    refused = verdict_types.refusal(
        tag="r",
        against="best",
        decision=REJECT,
        basis="micro_test_fail",
        reason="x",
        config=gate.GateConfig(),
        details={},
    )
    rundir.write_verdict(judging.verdict_file(refused))
    assert json.loads(rundir.verdict_path("r").read_text())["rollouts"].startswith("none")


# -- second round: what the first mutation run left alive ----------------------------------------


def reference_monte_carlo(deltas, n_resamples, seed):
    """The documented stream: chunks of 2000 int8 sign rows from default_rng(seed), ties (within
    1e-12 of Σ|d|) counted against the candidate, p = (count + 1) / (n_resamples + 1)."""
    deltas = deltas[deltas != 0]
    magnitude, observed = np.abs(deltas), float(np.sum(deltas))
    rng, count, drawn = np.random.default_rng(seed), 0, 0
    while drawn < n_resamples:
        size = min(2000, n_resamples - drawn)
        signs = rng.integers(0, 2, size=(size, deltas.size), dtype=np.int8) * 2 - 1
        count += int(np.sum(signs @ magnitude >= observed - 1e-12 * magnitude.sum()))
        drawn += size
    return count + 1, n_resamples + 1


@pytest.mark.parametrize("n_resamples", [2000, 2500, 4001])
def test_monte_carlo_is_the_documented_seeded_stream(n_resamples):
    rng = np.random.default_rng(11)
    deltas = rng.choice([-1, 1], size=17) * (OFF_GRID + rng.random(17) / 10)
    got = core._monte_carlo(deltas, n_resamples, 5)
    assert (got.numerator, got.denominator) == reference_monte_carlo(deltas, n_resamples, 5)
    assert got.p_value == got.numerator / got.denominator


def test_monte_carlo_counts_ties_against_the_candidate():
    # 18 equal off-grid magnitudes, 10 up and 8 down: many sign patterns tie the observed sum
    deltas = np.array([OFF_GRID] * 10 + [-OFF_GRID] * 8)
    truth = Fraction(sum(math.comb(18, k) for k in range(10, 19)), 2**18)  # ≥ 10 positive signs
    mc = core._monte_carlo(deltas, 20000, 0)
    assert abs(mc.p_value - float(truth)) < 4 * math.sqrt(float(truth) * (1 - float(truth)) / 20000)


def test_enumeration_covers_up_to_sixteen_tasks_and_reports_its_p():
    for size, method in ((1, "exact"), (16, "exact"), (17, "monte_carlo")):
        result = core._monte_carlo(np.full(size, OFF_GRID), 2000, 0)
        assert result.method == method
        if method == "exact":
            assert (result.numerator, result.denominator) == (1, 2**size)
            assert result.p_value == 1 / 2**size
    three = core._monte_carlo(np.array([OFF_GRID, -OFF_GRID / 2, OFF_GRID / 3]), 10, 0)
    assert three.p_value == three.numerator / 8 == exact_tail([OFF_GRID, -OFF_GRID / 2, OFF_GRID / 3])


def test_tiny_deltas_keep_a_tiny_tie_tolerance():
    tiny = np.full(5, 1e-7 * OFF_GRID)  # Σ|d| ≈ 1.6e-7: the tolerance must scale down with it
    assert core._monte_carlo(tiny, 10, 0).p_value == 1 / 32


def test_float_tail_never_goes_negative_where_fft_noise_would():
    values = np.array([2, 3] * 35)
    total = int(values.sum())
    for observed in range(total - 30, total + 1):
        tail = core._float_tail(values, observed)
        exact = core._count_at_least(list(values), observed) / 2 ** len(values)
        assert tail >= 0.0 and tail == pytest.approx(exact, rel=1e-6, abs=1e-15)


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
    assert over.decision == ACCEPT and "+0.5000 > 0.9·SE = 0.4500 (SE = 0.5000, n = 2)" in over.reason
    assert "= +1.0000 > 0 (WARNING: SE = 0" in judge([[1.0]], [[0.0]], paired).reason
    assert "= +0.0000 ≤ 0 (WARNING: SE = 0" in judge([[0.0]], [[0.0]], paired).reason


def test_combined_se_with_two_tasks_has_a_between_part():
    matrix = np.array([[1.0, 1.0], [0.0, 0.0]])
    assert stats.combined_se(matrix) == pytest.approx(math.sqrt(0.5 / 2))


def test_a_refusal_has_no_trials_footprint_or_errors():
    v = verdict_types.refusal(
        tag="c",
        against="b",
        decision=REJECT,
        basis="micro_test_fail",
        reason="r",
        config=gate.GateConfig(),
        details={},
    )
    assert v.trials == 0 and v.footprint == [] and v.infra_errors == {} and v.warnings == []


def test_imputation_fills_the_best_as_fails_against_a_reject():
    # rejected (Δ̄ = 0); the best's missing trials as fails would make Δ̄ = +2/3 on 5 tasks
    cand = np.ones((5, 3))
    best = np.array([[1, np.nan, np.nan]] * 5, float)
    assert judge(cand, best).decision == REJECT
    verdict = judge(cand, best, infra_errors={"candidate": 0, "best": 10})
    assert (verdict.decision, verdict.basis) == (INDECISIVE, "error_imbalance")


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


def test_evidence_passes_tags_sizes_and_infra_counts(tmp_path, val_rollout):
    record = val_rollout
    rundir = RunDir(tmp_path / "run")
    for tag, size in (("small", 1), ("big", 9)):
        files = rundir.candidate_dir(tag) / "files"
        files.mkdir(parents=True)
        (files / "prompt.md").write_text("x" * size)
    records = [record(tag, f"t{i}", 0, 1.0) for tag in ("small", "big") for i in range(4)]
    records += [record("small", "t0", 1, None, infra="timeout"), record("big", "t0", 1, None, infra="x")]
    ev = judging.Evidence(
        evidence.index_records(records), [f"t{i}" for i in range(4)], 2, rundir.snapshot_size
    )
    verdict = ev.judge("small", "big", gate.GateConfig(mode="simplicity_tiebreak"))
    assert (verdict.tag, verdict.against, verdict.decision) == ("small", "big", ACCEPT)  # a tie, smaller wins
    assert verdict.infra_errors == {"candidate": 1, "best": 1}
    assert ev.judge("big", "small", gate.GateConfig(mode="simplicity_tiebreak")).decision == REJECT


def test_the_calibration_alarm_says_what_it_means():
    alarm = judging.as_null(judge(np.ones((6, 1)), np.zeros((6, 1))))
    assert alarm.warnings == [
        "CALIBRATION ALARM: a byte-identical copy of the best was accepted; "
        "the gate is not holding its error rate on this run"
    ]


# -- third round ----------------------------------------------------------------------------------

FLIPPABLE = (np.array([[1, np.nan, np.nan]] * 5, float), np.array([[0, 1, 1]] * 5, float))


def test_check_rewards_names_the_first_bad_value():
    with pytest.raises(ValueError, match=r"got np.float64\(1.5\)|got 1.5"):
        stats.check_rewards(np.array([[0.0, 1.5]]))
    with pytest.raises(ValueError, match=r"got np.float64\(-0.5\)|got -0.5"):
        stats.check_rewards(np.array([[1.0, -0.5]]))


def test_mean_se_of_two_values():
    assert stats.mean_se(np.array([0.0, 1.0])) == (0.5, 0.5)


def test_paired_deltas_refuse_arms_of_different_tasks():
    with pytest.raises(ValueError, match=r"^the two arms must cover the same tasks, in the same order$"):
        stats.paired_deltas(np.ones((3, 1)), np.ones((2, 1)))


def test_integer_deltas_leave_out_tasks_the_best_never_ran():
    cand = np.array([[1.0, 0.0], [1.0, 1.0]])
    best = np.array([[0.0, 0.0], [np.nan, np.nan]])
    assert stats.integer_deltas(cand, best, 1) == [1]


def test_integer_deltas_stay_exact_past_float_precision():
    # task t has t + 1 valid binary trials (at most 20 passes): L = lcm(1..41) ≈ 2.2e17, so the
    # scaled deltas pass 2^53 while L·max Σ stays under the 2^62 guard of the int64 path
    counts = range(1, 42)
    cand = np.full((41, 41), np.nan)
    for t, n in enumerate(counts):
        cand[t, :n] = [1.0] * min(n, 20) + [0.0] * (n - min(n, 20))
    best = np.full((41, 41), np.nan)
    best[:, 0] = 0.0
    scale = math.lcm(*counts)
    assert scale * 20 < 2**62 and scale > 2**53
    expected = [int(Fraction(min(n, 20), n) * scale) for n in counts]
    assert stats.integer_deltas(cand, best, 1) == expected


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
    assert empty.reason.startswith("no task valid on both sides is below min_coverage 0%")


def test_coverage_reason_gives_the_paired_share():
    cand = np.ones((10, 1))
    cand[:3] = np.nan
    verdict = judge(cand, np.zeros((10, 1)), gate.GateConfig())
    assert verdict.reason == "paired coverage 70% is below min_coverage 80%: could not judge"


def test_k_se_is_recorded_only_for_k_se_modes():
    assert judge(np.ones((3, 1)), np.zeros((3, 1))).k_se is None
    assert judge(np.ones((3, 1)), np.zeros((3, 1)), gate.GateConfig(mode="strict")).k_se is None
    assert judge(np.ones((3, 1)), np.zeros((3, 1)), gate.GateConfig(mode="paired", k_se=0.7)).k_se == 0.7


def test_the_confidence_interval_uses_the_configured_seed():
    deltas = np.array([0.0, 0.2, 0.4, 1.0, -0.2, 0.6, 0.1])
    cand = np.clip(deltas, 0, 1)[:, None]
    best = np.clip(-deltas, 0, 1)[:, None]
    for seed in (0, 7):
        verdict = judge(cand, best, gate.GateConfig(seed=seed, min_coverage=0.0))
        assert verdict.ci == list(stats.bootstrap_ci(deltas, seed=seed))
    assert stats.bootstrap_ci(deltas, seed=0) != stats.bootstrap_ci(deltas, seed=7)


def test_bootstrap_ci_is_scipys_bca_with_the_documented_defaults():
    from scipy import stats as sps

    deltas = np.array([0.0, 0.2, 0.4, 1.0, -0.2, 0.6, 0.1])

    def scipy_ci(data, method, n_resamples=2000, seed=0):
        result = sps.bootstrap(
            (data,),
            np.mean,
            confidence_level=0.95,
            n_resamples=n_resamples,
            method=method,
            random_state=np.random.default_rng(seed),
        )
        return tuple(float(x) for x in result.confidence_interval)

    assert stats.bootstrap_ci(deltas) == scipy_ci(deltas, "BCa")
    assert stats.bootstrap_ci(np.array([0.0, 1.0])) is not None
    rng = np.random.default_rng(1)
    at, past = rng.random(2000), rng.random(2001)
    assert stats.bootstrap_ci(at, n_resamples=30) == scipy_ci(at, "BCa", 30)
    # past 2000 tasks the interval is the analytic one, and the verdict says so (ci_method)
    assert core.ci_method(2000) == core.BCA and core.ci_method(2001) == core.NORMAL
    assert stats.bootstrap_ci(past, n_resamples=30) == core.normal_ci(past)


def test_bootstrap_ci_falls_back_to_percentile_when_bca_fails(monkeypatch):
    from scipy import stats as sps

    # BCa undefined (its level comes out nan, as for an acceleration of 0/0): scipy's percentile
    monkeypatch.setattr(core, "_ndtr", lambda x: float("nan"))
    deltas = np.array([0.0, 0.2, 0.4, 1.0, -0.2, 0.6, 0.1])
    got = stats.bootstrap_ci(deltas, seed=3)
    expected = sps.bootstrap(
        (deltas,),
        np.mean,
        confidence_level=0.95,
        n_resamples=2000,
        method="percentile",
        rng=np.random.default_rng(3),
    ).confidence_interval
    assert got == pytest.approx((float(expected[0]), float(expected[1])), rel=1e-12, abs=1e-12)


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


# -- fourth round ---------------------------------------------------------------------------------


@pytest.mark.parametrize("big_side", ["candidate", "best"])
def test_integer_deltas_take_python_integers_where_int64_would_overflow(big_side):
    # grid 1000, trial counts 1..41 (L = lcm ≈ 2.2e17): a full pass on the one-trial task scales to
    # 1000·L ≈ 2.2e20, past int64, so the guard must send it down the Python-integer path
    counts = range(1, 42)
    big = np.full((41, 41), np.nan)
    for t, n in enumerate(counts):
        big[t, :n] = 0.0
    big[0, 0] = 1.0
    small = np.full((41, 41), np.nan)
    small[:, 0] = 0.001
    cand, best = (big, small) if big_side == "candidate" else (small, big)
    scale = 1000 * math.lcm(*counts)
    expected = [
        int(
            (
                Fraction(int(round(np.nansum(cand[t]) * 1000)), 1000 * int(np.sum(~np.isnan(cand[t]))))
                - Fraction(int(round(np.nansum(best[t]) * 1000)), 1000 * int(np.sum(~np.isnan(best[t]))))
            )
            * scale
        )
        for t in range(41)
    ]
    assert max(abs(e) for e in expected) > 2**63
    assert stats.integer_deltas(cand, best, 1000) == expected


def test_the_default_bootstrap_draws_2000_resamples():
    from scipy import stats as sps

    deltas = np.random.default_rng(4).normal(0.1, 0.3, 30)
    expected = sps.bootstrap(
        (deltas,),
        np.mean,
        confidence_level=0.95,
        n_resamples=2000,
        method="BCa",
        random_state=np.random.default_rng(0),
    ).confidence_interval
    assert stats.bootstrap_ci(deltas) == pytest.approx((float(expected[0]), float(expected[1])), rel=1e-12)


def test_the_percentile_fallback_keeps_the_confidence_level(monkeypatch):
    from scipy import stats as sps

    monkeypatch.setattr(core, "_ndtr", lambda x: float("nan"))
    deltas = np.random.default_rng(5).normal(0.1, 0.3, 30)
    expected = sps.bootstrap(
        (deltas,),
        np.mean,
        confidence_level=0.8,
        n_resamples=500,
        method="percentile",
        rng=np.random.default_rng(2),
    ).confidence_interval
    got = stats.bootstrap_ci(deltas, confidence=0.8, n_resamples=500, seed=2)
    assert got == pytest.approx((float(expected[0]), float(expected[1])), rel=1e-12, abs=1e-12)


def test_count_at_least_stays_exact_past_float_precision():
    # C(60, k) summed over k ≥ 30 exceeds 2^53: the counts must stay Python integers
    expected = sum(math.comb(60, k) for k in range(30, 61))
    assert expected > 2**53 and core._count_at_least([1] * 60, 0) == expected


def test_reward_grid_tolerance_is_one_billionth_per_grid_step():
    assert stats.reward_grid() == 1
    assert stats.reward_grid(np.array([[1 / 3 + 5e-10]])) == 3  # float noise around a third
    assert stats.reward_grid(np.array([[1 - 1.5e-9]])) is None  # off every grid by more than that


def test_sign_flip_test_defaults_and_result_records():
    rng = np.random.default_rng(11)
    cand = OFF_GRID + rng.random((20, 1)) / 2
    base = OFF_GRID + rng.random((20, 1)) / 2  # mixed signs: p depends on the draws
    default = stats.sign_flip_test(cand, base)
    assert default == stats.sign_flip_test(cand, base, n_resamples=20000, seed=0)
    assert default != stats.sign_flip_test(cand, base, seed=1)
    assert default.denominator == 20001
    mixed = stats.sign_flip_test(np.ones((3, 1)), np.full((3, 1), 3 * OFF_GRID))  # only the best is off-grid
    assert mixed.method == "exact" and (mixed.numerator, mixed.denominator) == (1, 8)  # enumerated
    assert stats.sign_flip_test(np.ones((3, 1)), np.ones((3, 1))) == stats.SignFlipResult(1.0, "exact", 1, 1)
    counted = stats.sign_flip_test(np.ones((5, 1)), np.zeros((5, 1)))
    assert counted == stats.SignFlipResult(1 / 32, "exact", 1, 32)
    many = np.array([[1.0]] * 40 + [[0.0]] * 21)
    fast = stats.sign_flip_test(many, 1.0 - many, alpha=0.5)
    assert fast.method == "exact" and fast.numerator == round(fast.p_value * 2**53) > 0
