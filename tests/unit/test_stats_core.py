"""The statistics (stats/core.py) pinned number by number: off-grid rewards (enumeration up to 16
tasks, seeded Monte Carlo beyond), the exact counter and its float fast path, α read as decimal
text, the estimators behind the report and the bootstrap interval. Expected values are worked out
by hand (or by brute force in the test), never copied from a run; each test was written to kill
a mutant (``python benchmarks/mutation.py``)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from pytest_capevolve import _stats as stats
from pytest_capevolve._stats import sign_flip


def exact_tail(deltas) -> float:
    """P(Σ s_i |d_i| ≥ Σ d_i) over all 2^N sign patterns, enumerated (ties to the candidate's loss)."""
    deltas = np.asarray([d for d in deltas if d != 0], float)
    if deltas.size == 0:
        return 1.0
    signs = np.array(list(itertools.product((1, -1), repeat=deltas.size)))
    return float(np.mean(signs @ np.abs(deltas) >= deltas.sum() - 1e-12 * np.abs(deltas).sum()))


OFF_GRID = math.pi / 10  # no grid up to GRID_MAX holds it


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


F = Fraction


def test_off_grid_rewards_are_recognised():
    assert stats.reward_grid(np.array([[0.0, 0.5, 1.0]])) == 2
    assert stats.reward_grid(np.array([[0.25, 1.0]]), np.array([[0.2]])) == 20
    assert stats.reward_grid(np.array([[OFF_GRID]])) is None
    assert (
        stats.reward_grid(np.array([[1 / 1000]])) == 1000
        and stats.reward_grid(np.array([[1 / 1001]])) is None
    )
    assert stats.reward_grid(np.array([[np.nan, 1.0]])) == 1


def test_off_grid_ties_count_against_the_candidate():
    # d = (a, b, −(a + b)): Σ = 0 up to rounding; the patterns summing to ±0 both count
    a, b = 0.1 + OFF_GRID / 100, 0.2 + OFF_GRID / 100
    result = sign_flip._monte_carlo(np.array([a, b, -(a + b)]), 100, 0)
    assert (result.numerator, result.denominator, result.method) == (5, 8, "exact")
    assert sign_flip._monte_carlo(np.array([0.0, 0.0]), 100, 0) == stats.SignFlipResult(1.0, "exact", 1, 1)


def test_off_grid_many_tasks_use_seeded_monte_carlo_with_the_plus_one_correction():
    rng = np.random.default_rng(7)
    deltas = rng.choice([-1, 1], size=18) * (OFF_GRID + rng.random(18) / 10)
    truth = exact_tail(deltas)
    mc = sign_flip._monte_carlo(deltas, 2500, 3)  # two chunks: 2000 + 500 draws
    assert mc.method == "monte_carlo" and mc.denominator == 2501
    assert mc.numerator >= 1 and mc.p_value == mc.numerator / mc.denominator  # +1: never a p of 0
    assert abs(mc.p_value - truth) < 4 * math.sqrt(truth * (1 - truth) / 2500) + 1 / 2501
    assert sign_flip._monte_carlo(deltas, 2500, 3) == mc  # seeded: the same draws every time
    assert sign_flip._monte_carlo(deltas, 2500, 4) != mc
    top = sign_flip._monte_carlo(np.abs(deltas), 2000, 0)  # every delta positive: only one pattern reaches it
    assert (top.numerator, top.denominator) == (1, 2001)
    assert 0 < top.p_value < 1 / 2000


@pytest.mark.parametrize("values", [[1], [1, 1], [1, 2, 3], [2, 2, 3, 5], [1, 1, 1, 4, 4, 7]])
def test_count_at_least_equals_enumeration(values):
    for threshold in range(-sum(values) - 1, sum(values) + 2):
        brute = sum(
            1
            for signs in itertools.product((1, -1), repeat=len(values))
            if sum(s * v for s, v in zip(signs, values, strict=True)) >= threshold
        )
        assert sign_flip._count_at_least(values, threshold) == brute


def test_float_tail_equals_exact_counts():
    for values, observed in (([1] * 70, 20), ([1, 2, 3] * 25, 40), ([3, 1, 4, 1, 5] * 14, -10)):
        exact = sign_flip._count_at_least(values, observed) / 2 ** len(values)
        assert sign_flip._float_tail(np.array(values), observed) == pytest.approx(exact, rel=1e-9, abs=1e-15)
    assert sign_flip._float_tail(np.array([1, 1]), 3) == 0.0
    assert sign_flip._float_tail(np.array([1, 1]), -5) == 1.0


@pytest.mark.parametrize("seed", range(6))
def test_one_pass_float_tail_equals_exact_counts_on_graded_mixed_deltas(seed):
    """Graded rewards with mixed trial counts: many distinct |Δ|, repeats, a common factor (the
    tail divides it out), observed sums off that factor and deep in the tail."""
    rng = np.random.default_rng(seed)
    common = int(rng.choice([1, 2, 6]))
    values = (rng.integers(1, 40, size=int(rng.integers(61, 110))) * common).tolist()
    total = sum(values)
    for observed in [-total, -7, 0, 1, total // 5, total // 3, total // 2, total - 1, total, total + 1]:
        exact = sign_flip._count_at_least(values, observed) / 2 ** len(values)
        assert sign_flip._float_tail(np.array(values), observed) == pytest.approx(exact, rel=1e-9, abs=1e-15)


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


def test_t_ci():
    assert stats.t_ci(np.array([0.3])) is None
    assert stats.t_ci(np.array([0.2, 0.2, 0.2])) == (0.2, 0.2)
    deltas = np.array([0.0, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, -0.2])
    low, high = stats.t_ci(deltas)
    assert low < deltas.mean() < high and high - deltas.mean() == pytest.approx(deltas.mean() - low)
    narrow = stats.t_ci(deltas, confidence=0.5)
    assert low < narrow[0] < narrow[1] < high


@pytest.mark.parametrize("n_resamples", [2000, 2500, 4001])
def test_monte_carlo_is_the_documented_seeded_stream(n_resamples):
    rng = np.random.default_rng(11)
    deltas = rng.choice([-1, 1], size=17) * (OFF_GRID + rng.random(17) / 10)
    got = sign_flip._monte_carlo(deltas, n_resamples, 5)
    assert (got.numerator, got.denominator) == reference_monte_carlo(deltas, n_resamples, 5)
    assert got.p_value == got.numerator / got.denominator


def test_monte_carlo_counts_ties_against_the_candidate():
    # 18 equal off-grid magnitudes, 10 up and 8 down: many sign patterns tie the observed sum
    deltas = np.array([OFF_GRID] * 10 + [-OFF_GRID] * 8)
    truth = Fraction(sum(math.comb(18, k) for k in range(10, 19)), 2**18)  # ≥ 10 positive signs
    mc = sign_flip._monte_carlo(deltas, 20000, 0)
    assert abs(mc.p_value - float(truth)) < 4 * math.sqrt(float(truth) * (1 - float(truth)) / 20000)


def test_enumeration_covers_up_to_sixteen_tasks_and_reports_its_p():
    for size, method in ((1, "exact"), (16, "exact"), (17, "monte_carlo")):
        result = sign_flip._monte_carlo(np.full(size, OFF_GRID), 2000, 0)
        assert result.method == method
        if method == "exact":
            assert (result.numerator, result.denominator) == (1, 2**size)
            assert result.p_value == 1 / 2**size
    three = sign_flip._monte_carlo(np.array([OFF_GRID, -OFF_GRID / 2, OFF_GRID / 3]), 10, 0)
    assert three.p_value == three.numerator / 8 == exact_tail([OFF_GRID, -OFF_GRID / 2, OFF_GRID / 3])


def test_tiny_deltas_keep_a_tiny_tie_tolerance():
    tiny = np.full(5, 1e-7 * OFF_GRID)  # Σ|d| ≈ 1.6e-7: the tolerance must scale down with it
    assert sign_flip._monte_carlo(tiny, 10, 0).p_value == 1 / 32


def test_float_tail_never_goes_negative_where_fft_noise_would():
    values = np.array([2, 3] * 35)
    total = int(values.sum())
    for observed in range(total - 30, total + 1):
        tail = sign_flip._float_tail(values, observed)
        exact = sign_flip._count_at_least(list(values), observed) / 2 ** len(values)
        assert tail >= 0.0 and tail == pytest.approx(exact, rel=1e-6, abs=1e-15)


def test_combined_se_with_two_tasks_has_a_between_part():
    matrix = np.array([[1.0, 1.0], [0.0, 0.0]])
    assert stats.combined_se(matrix) == pytest.approx(math.sqrt(0.5 / 2))


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


def test_count_at_least_stays_exact_past_float_precision():
    # C(60, k) summed over k ≥ 30 exceeds 2^53: the counts must stay Python integers
    expected = sum(math.comb(60, k) for k in range(30, 61))
    assert expected > 2**53 and sign_flip._count_at_least([1] * 60, 0) == expected


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
    # past 60 tasks a small p is still a count, never a float relabelled as one
    assert fast.method == "exact" and fast.denominator == 2**61
    assert fast.numerator == sign_flip._count_at_least([1] * 61, 40 - 21) > 0


def test_reward_grid_of_no_matrix_reads_no_value():
    """No matrix: no value to put on a grid, so grid 1. (Freeing an off-grid one-element array
    first means a stray uninitialised element would read as π/10, off every grid.)"""
    for _ in range(3):
        stray = np.array([math.pi / 10])
        del stray
        assert stats.reward_grid() == 1
