"""Shared per-arm summaries (stats/arms.py) give the plain functions' numbers, bit for bit.

The gate reads each arm through one :class:`stats.ArmSummary` (the best's shared by every
candidate); these properties hold every number it derives equal to the reference it replaced,
so a verdict records the same numbers either way."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import gate, rules
from pytest_capevolve.strategies import reward_matrices

SLOW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def bitwise_equal(a, b) -> bool:
    """Same shape, same values, nan where nan, and the same sign on every zero."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@st.composite
def paired_arms(draw, *, max_tasks=30, off_grid=False):
    """(candidate, best) over the same tasks and trials, any trial possibly missing."""
    grid = draw(st.sampled_from([1, 2, 4, 5, 10, 997]))
    best = draw(reward_matrices(max_tasks=max_tasks, grid=grid, missing=True))
    tasks, trials = best.shape
    cell = st.one_of(st.integers(0, grid).map(lambda k: k / grid), st.just(float("nan")))
    if off_grid:
        cell = st.one_of(cell, st.floats(0.0, 1.0, allow_nan=False))
    rows = draw(st.lists(st.lists(cell, min_size=trials, max_size=trials), min_size=tasks, max_size=tasks))
    return np.array(rows, dtype=float).reshape(tasks, trials), best


@SLOW
@given(reward_matrices(max_tasks=40, missing=True))
def test_summary_numbers_equal_the_plain_functions(matrix):
    arm = stats.ArmSummary(matrix)
    assert bitwise_equal(arm.means, stats.task_means(matrix))
    assert bitwise_equal(arm.stderrs, stats.task_stderrs(matrix))
    assert bitwise_equal(arm.counts, np.sum(~np.isnan(matrix), axis=1))
    assert gate._covered(arm) == stats.coverage(matrix)
    assert np.array_equal(arm.values, np.unique(matrix[~np.isnan(matrix)]))
    assert arm.means_or_none == gate._none_for_nan(stats.task_means(matrix))


@SLOW
@given(paired_arms(max_tasks=90), st.sampled_from([None, 0.05, 0.5]))
def test_sign_flip_test_on_summaries_equals_it_on_matrices(arms, alpha):
    candidate, best = arms
    shared = stats.sign_flip_test(stats.ArmSummary(candidate), stats.ArmSummary(best), alpha=alpha)
    assert shared == stats.sign_flip_test(candidate, best, alpha=alpha)
    grid = stats.reward_grid(candidate, best)
    if grid is not None:
        ints = stats.integer_deltas_of(stats.ArmSummary(candidate), stats.ArmSummary(best), grid)
        assert [int(d) for d in ints] == stats.integer_deltas(candidate, best, grid)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(paired_arms(max_tasks=20, off_grid=True))
def test_sign_flip_test_on_summaries_equals_it_on_matrices_off_the_grid(arms):
    candidate, best = arms
    shared = stats.sign_flip_test(stats.ArmSummary(candidate), stats.ArmSummary(best), n_resamples=500)
    assert shared == stats.sign_flip_test(candidate, best, n_resamples=500)


def fine_grid_mixed_counts(rng, tasks, lift=0.0):
    """Rewards k/997 with task t valid on 1 + t % 40 trials: lcm(1..40)·997 per reward unit,
    so the integer deltas pass int64 and their sums span far more than EXACT_MAX_SPAN."""
    matrix = np.round(np.clip(rng.random((tasks, 40)) + lift, 0, 1) * 997) / 997
    for t in range(tasks):
        matrix[t, 1 + t % 40 :] = np.nan
    return matrix


def test_python_integer_deltas_and_a_span_too_wide_for_the_exact_tail():
    rng = np.random.default_rng(3)
    candidate, best = fine_grid_mixed_counts(rng, 80, lift=0.3), fine_grid_mixed_counts(rng, 80)
    ints = stats.integer_deltas_of(stats.ArmSummary(candidate), stats.ArmSummary(best), 997)
    assert isinstance(ints, list) and ints == stats.integer_deltas(candidate, best, 997)
    assert sum(abs(d) for d in ints) > stats.EXACT_MAX_SPAN
    coarse = stats.sign_flip_on_integers(ints)  # the exact tail would not fit: rounded deltas
    assert coarse is not None and coarse.method == "exact_coarsened" and coarse.coarsening > 1
    for alpha in (None, 0.05):
        expected = stats.sign_flip_test(candidate, best, alpha=alpha, n_resamples=2000)
        found = stats.sign_flip_test(*map(stats.ArmSummary, (candidate, best)), alpha=alpha, n_resamples=2000)
        assert found == expected
        assert expected.method == "exact_coarsened" and expected.at_most(0.05)  # lifted by 0.3


def test_gate_on_a_span_too_wide_says_coarsened_in_the_verdict():
    rng = np.random.default_rng(4)
    candidate, best = fine_grid_mixed_counts(rng, 80, lift=0.3), fine_grid_mixed_counts(rng, 80)
    verdict = gate.decide(
        candidate, best, tag="c", against="b", task_ids=[f"t{i}" for i in range(80)], config=gate.GateConfig()
    )
    assert verdict.p_method == "exact_coarsened" and verdict.decision == "accept"
    assert Fraction(verdict.p_exact) < Fraction(1, 20001)  # no Monte Carlo floor
    assert "deltas rounded to" in verdict.reason


@pytest.mark.parametrize("alpha", [None, 0.05])
def test_int64_deltas_are_summed_exactly_and_equal_their_python_integers(alpha):
    deltas = [3 * k + 1 for k in range(70)] + [-50] * 5
    from_array = stats.sign_flip_on_integers(np.array(deltas, dtype=np.int64), alpha)
    assert from_array == stats.sign_flip_on_integers(deltas, alpha)
    assert from_array.method == "exact" and from_array.p_value < 0.001  # 70 of 75 positive


def reference_regressions(candidate, best, task_ids, success_threshold):
    """The regressions rule as it was computed before the shared summaries (whole columns)."""
    cand_means, best_means = stats.task_means(candidate), stats.task_means(best)
    noise = 2 * np.sqrt(stats.task_stderrs(candidate) ** 2 + stats.task_stderrs(best) ** 2)
    best_passed = 2 * np.sum(best >= success_threshold, axis=1) >= np.sum(~np.isnan(best), axis=1)
    drop = best_means - cand_means
    hit = best_passed & (drop > noise)
    return [
        {
            "task_id": task_ids[i],
            "best": float(best_means[i]),
            "candidate": float(cand_means[i]),
            "drop": float(drop[i]),
            "noise": float(noise[i]),
        }
        for i in np.flatnonzero(hit)
    ]


@SLOW
@given(paired_arms(max_tasks=40), st.sampled_from([0.5, 0.9, 1.0]))
def test_regressions_equal_the_whole_column_reference(arms, threshold):
    candidate, best = arms
    ids = [f"t{i}" for i in range(len(best))]
    found = gate.regressions(candidate, best, ids, threshold)
    expected = reference_regressions(candidate, best, ids, threshold)
    assert found == expected
    assert [math.copysign(1, r["drop"]) for r in found] == [1.0] * len(found)


@SLOW
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=60))
def test_first_of_each_pair_is_np_unique_over_rows(pairs):
    a = np.array([p[0] / 4 for p in pairs])
    b = np.array([p[1] / 4 for p in pairs])
    _, expected = np.unique(np.stack([a, b], axis=1), axis=0, return_index=True)
    assert sorted(gate._first_of_each_pair(a, b).tolist()) == sorted(expected.tolist())


def test_summarize_shares_equal_contents_and_never_serves_a_changed_arm():
    rng = np.random.default_rng(0)
    best = (rng.random((50, 4)) < 0.5).astype(float)
    first = stats.summarize(best)
    assert stats.summarize(best.copy()) is first  # same contents: the best's work is shared
    changed = best.copy()
    changed[7, 2] = 1.0 - changed[7, 2]
    assert stats.summarize(changed) is not first
    assert stats.summarize(changed).means[7] != first.means[7]
    best[7, 2] = 1.0 - best[7, 2]  # the caller edits its array after summarizing: not seen
    assert stats.summarize(best).means[7] == stats.task_means(best)[7]
    assert not first.matrix.flags.writeable


def test_verdicts_against_one_best_equal_fresh_ones_in_any_order():
    """Gating many candidates against one best (the shared summary) records the same numbers as
    gating each against a fresh copy of the best after unrelated arms evicted it."""
    rng = np.random.default_rng(1)
    tasks, trials = 300, 3
    rates = rng.random(tasks)
    best = (rng.random((tasks, trials)) < rates[:, None]).astype(float)
    candidates = [(rng.random((tasks, trials)) < rates[:, None] + 0.1 * i).astype(float) for i in range(4)]
    ids = [f"t{i}" for i in range(tasks)]
    config = gate.GateConfig(veto_regressions=True)
    shared = [
        gate.decide(c, best, tag="c", against="b", task_ids=ids, config=config).to_dict() for c in candidates
    ]
    fresh = []
    for c in reversed(candidates):
        for _ in range(stats.arms.CACHE_SIZE):  # evict everything
            stats.summarize(rng.random((tasks, trials)))
        fresh.append(gate.decide(c, best.copy(), tag="c", against="b", task_ids=ids, config=config).to_dict())
    assert shared == fresh[::-1]
    assert len({v["decision"] for v in shared}) > 1  # the candidates really differ


def reference_stable(candidate, best, config, spread, decision):
    """verdict_stable as computed before the p-value bound: every kind of task dropped and the
    rule run again on the smaller matrices."""
    cand_means, best_means = stats.task_means(candidate), stats.task_means(best)
    valid = np.flatnonzero(~np.isnan(cand_means) & ~np.isnan(best_means))
    pairs = np.stack([cand_means[valid], best_means[valid]], axis=1)
    _, first = np.unique(pairs, axis=0, return_index=True)
    if first.size > gate.STABILITY_CHECKS:
        return None
    for i in sorted(int(j) for j in valid[first]):
        keep = np.arange(len(candidate)) != i
        cand, bst = candidate[keep], best[keep]
        deltas, _ = stats.paired_deltas(cand, bst)
        if deltas.size == 0:
            return False
        again, *_ = rules.RuleInput(cand, bst, deltas, config, None, None).run()
        if again == gate.ACCEPT and spread is not None and not float(np.mean(deltas)) > spread:
            again = gate.REJECT
        if again != decision:
            return False
    return True


def check_stability_against_reference(candidate, best, config, spread=None):
    nulls = None if spread is None else [spread, -spread / 2]
    ids = [f"t{i}" for i in range(len(best))]
    verdict = gate.decide(
        candidate, best, tag="c", against="b", task_ids=ids, config=config, null_deltas=nulls
    )
    if verdict.basis == "coverage":
        return verdict
    decision = gate.REJECT if verdict.basis == "null_floor" else verdict.decision
    if verdict.basis == "regression_veto":
        decision = gate.ACCEPT
    assert verdict.verdict_stable == reference_stable(candidate, best, config, spread, decision)
    return verdict


@SLOW
@given(
    paired_arms(max_tasks=80),
    st.sampled_from([0.05, 0.2, 0.5]),
    st.sampled_from([None, 0.01, 0.2]),
    st.sampled_from(["exact", "paired", "strict"]),
)
def test_verdict_stable_equals_dropping_every_kind_of_task(arms, alpha, spread, mode):
    candidate, best = arms
    config = gate.GateConfig(mode=mode, alpha=alpha, min_coverage=0.0)
    check_stability_against_reference(candidate, best, config, spread)


def test_verdict_stable_equals_the_reference_near_alpha_on_many_tasks():
    """Binary arms on 20–300 tasks with effects around the α = 0.05 boundary, where the
    p-value bound must hand the close drops back to the test (and the float tail runs)."""
    rng = np.random.default_rng(7)
    seen = {"stable": 0, "unstable": 0, "accept": 0, "reject": 0}
    for case in range(60):
        tasks, trials = int(rng.choice([20, 70, 300])), int(rng.integers(1, 3))
        rates = rng.random(tasks)
        best = (rng.random((tasks, trials)) < rates[:, None]).astype(float)
        lift = rng.uniform(0.0, 0.25) * (20 / tasks) ** 0.5
        candidate = (rng.random((tasks, trials)) < rates[:, None] + lift).astype(float)
        config = gate.GateConfig(alpha=0.05, min_coverage=0.0)
        verdict = check_stability_against_reference(candidate, best, config, 0.01 if case % 3 == 0 else None)
        seen["stable" if verdict.verdict_stable else "unstable"] += verdict.verdict_stable is not None
        seen[verdict.decision] += 1
    assert min(seen.values()) >= 5, seen  # both outcomes of both questions were exercised
