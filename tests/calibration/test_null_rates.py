"""What each rule does to null candidates (byte-identical copies, or arms drawn from the same
per-task rates), measured as a rate against an independent reference: an enumeration of the
sign patterns, or a binomial bound on a seeded simulation. Moved here from tests/unit (their
files there keep the pure properties), so the fast set stays fast; each test keeps to a few
seconds. The docs quote these rates and name the tests (the-gate.md, what-the-gate-promises.md,
compare.md)."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from unit.test_rounds import binary_arm, exact_judge
from unit.test_sequential_stats import null_deltas
from unit.test_stats_properties import deltas_matrix

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import screen
from pytest_capevolve._decide.alpha_budget import look_schedule
from pytest_capevolve._decide.rounds import gate_round
from pytest_capevolve._decide.verdict import ACCEPT, GateConfig
from pytest_capevolve._stats import sequential as seq
from pytest_capevolve._stats.arms import sign_flip_test
from pytest_capevolve._stats.clusters import cluster_sign_flip_test
from pytest_capevolve.strategies import task_rates

ALPHA = 0.05

# -- the exact gate (tests/unit/test_stats_properties.py keeps its pure properties)


@given(st.lists(st.integers(-4, 4), min_size=1, max_size=10))
def test_exact_validity_share_of_accepted_sign_patterns_at_most_alpha(ints):
    """For fixed |d|, the share of the 2^N sign patterns the gate accepts is ≤ α. The gate's
    decision does not depend on the order of the tasks (tests/unit/test_stats_properties.py's
    ``test_invariant_to_task_order_and_trial_order``), so the patterns are enumerated as how many
    deltas of each magnitude are positive, each standing for its C(count, positives) orderings,
    and a zero's sign makes no other pattern (``deltas_matrix`` gives ±0 the same arms): each
    stands for its 2^zeros copies (at most 144 gates a case, not 2^10)."""
    magnitudes = Counter(abs(i) / 4 for i in ints)
    zeros = magnitudes.pop(0.0, 0)
    classes = sorted(magnitudes.items())
    accepted = 0
    for positives in itertools.product(*(range(count + 1) for _, count in classes)):
        deltas = [0.0] * zeros
        orderings = 1
        for (magnitude, count), up in zip(classes, positives, strict=True):
            deltas += [magnitude] * up + [-magnitude] * (count - up)
            orderings *= math.comb(count, up)
        cand, best = deltas_matrix(deltas)
        accepted += orderings * stats.sign_flip_test(cand, best, alpha=0.05).at_most(0.05)
    assert Fraction(accepted * 2**zeros, 2 ** len(ints)) <= Fraction(1, 20)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31))
def test_simulated_null_false_accepts_within_binomial_tolerance(seed):
    rng = np.random.default_rng(seed)
    rates = rng.choice([0.0, 1.0, 0.5, 0.3, 0.8], size=12)
    accepts = 0
    runs = 400
    for _ in range(runs):
        a = (rng.random((12, 5)) < rates[:, None]).astype(float)
        b = (rng.random((12, 5)) < rates[:, None]).astype(float)
        accepts += stats.sign_flip_test(a, b).at_most(0.05)
    # binomial upper tolerance at α = 0.05, 400 draws: mean 20, sd ≈ 4.4 → 4 sd
    assert accepts <= 20 + 4 * math.sqrt(runs * 0.05 * 0.95)


# -- a round of siblings, family-wise (tests/unit/test_rounds.py)

SIMULATION_SEED = 20261130


def test_three_null_siblings_over_300_rounds_stay_at_alpha_family_wise_with_holm():
    """Every round: a best and three byte-identical siblings (the same per-task rates). The
    chance that a round accepts any of them must stay ≤ α; without the correction it is
    about three times that."""
    rng = np.random.default_rng(SIMULATION_SEED)
    rounds = 300
    config = GateConfig(mode="exact", alpha=0.05)
    family_accepts = {"holm": 0, "none": 0}
    for _ in range(rounds):
        rates = rng.choice([0.0, 0.2, 0.5, 0.8, 1.0], size=30)
        arms = {tag: binary_arm(rng, rates) for tag in ("best", "a", "b", "c")}
        for method in family_accepts:
            outcome = gate_round(exact_judge(arms), ["a", "b", "c"], "best", config, method)
            family_accepts[method] += any(v.decision == ACCEPT for v in outcome.verdicts)
    print(f"seed {SIMULATION_SEED}: family accepts over {rounds} rounds: {family_accepts}")
    # binomial tolerance: at α = 0.05 over 300 rounds, mean 15, sd ≈ 3.8; allow 3 sd
    assert family_accepts["holm"] <= 15 + 3 * 3.8
    assert family_accepts["none"] > family_accepts["holm"]  # the correction is doing the work


# -- clusters (tests/unit/test_compare_clusters.py)


@pytest.mark.parametrize(("groups", "size"), [(6, 5), (10, 3), (16, 4)])
def test_type_one_error_is_at_most_alpha_over_null_cells_flipping_clusters(groups: int, size: int) -> None:
    """Over 400 null comparisons per cell (seeded): the cluster flip's false-accept rate is at
    most α (up to 3 binomial standard errors); flipping tasks one by one, which takes the
    tasks of a cluster as independent, is past it in the same data."""
    rng = np.random.default_rng(2026 + groups)
    clusters = [f"c{i}" for i in range(groups) for _ in range(size)]
    draws = 400
    by_cluster = by_task = 0
    for _ in range(draws):
        cand, best = null_runs(rng, groups, size, 2), null_runs(rng, groups, size, 2)
        by_cluster += cluster_sign_flip_test(cand, best, clusters, alpha=ALPHA).at_most(ALPHA)
        by_task += sign_flip_test(cand, best, alpha=ALPHA).at_most(ALPHA)
    slack = 3 * (ALPHA * (1 - ALPHA) / draws) ** 0.5
    assert by_cluster / draws <= ALPHA + slack, (groups, size, by_cluster)
    assert by_task / draws > ALPHA + slack, (groups, size, by_task)


def null_runs(rng: np.random.Generator, groups: int, size: int, trials: int) -> np.ndarray:
    """One run under the null: each cluster goes well or badly as a whole (a shared source),
    then each trial of each task passes with that cluster's rate. Two calls are two
    independent runs of the same agent: no difference."""
    rates = rng.choice([0.1, 0.9], size=groups)
    return (rng.random((groups * size, trials)) < np.repeat(rates, size)[:, None]).astype(float)


# -- the sequential gate (tests/unit/test_sequential_stats.py)


@settings(max_examples=10, deadline=None)
@given(rates=task_rates(min_tasks=5, max_tasks=30), seed=st.integers(0, 2**32 - 1))
def test_the_whole_sequential_test_holds_alpha_on_null_arms(rates: np.ndarray, seed: int) -> None:
    """Early accepts (a crossing) plus accepts at exhaustion (joint p ≤ α) together: at most α of
    null candidates, however the e-process's α_e was chosen (here α_e = α, the default)."""
    rng = np.random.default_rng(seed)
    deltas = null_deltas(rates, rng)[:400]
    code, _ = seq.first_crossings(deltas, alpha_efficacy=0.05, alpha_futility=0.05, min_effect=0.05)
    accepted = code == 1
    for i in np.flatnonzero(code != 1):
        num, den = seq.exhaustion_p(deltas[i], alpha_efficacy=0.05, n_resamples=400, seed=i)
        accepted[i] = Fraction(num, den) <= Fraction(1, 20)
    assert accepted.mean() <= 0.05 + 4 * np.sqrt(0.05 * 0.95 / accepted.size)


# -- screens and grow (tests/unit/test_screen_rules.py)
paired_arms = st.integers(1, 7).flatmap(
    lambda n: st.tuples(
        st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=3, max_size=3), min_size=n, max_size=n),
        st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=3, max_size=3), min_size=n, max_size=n),
    )
)


@given(paired_arms, st.sampled_from([0.05, 0.1, 0.25]))
def test_a_byte_identical_candidate_is_killed_for_harm_at_most_alpha_of_the_time(arms, alpha) -> None:
    """Under the null the two arms of each task are exchangeable: over every way of swapping
    them, the harm test kills at most α of the time."""
    cand, best = (np.array(a) for a in arms)
    kills = 0
    patterns = list(itertools.product((False, True), repeat=len(cand)))
    for swaps in patterns:
        c = np.array([b if s else x for x, b, s in zip(cand, best, swaps, strict=True)])
        b = np.array([x if s else b for x, b, s in zip(cand, best, swaps, strict=True)])
        kills += screen.decide_screen(c, b, alpha=alpha).decision == screen.KILL
    assert Fraction(kills, len(patterns)) <= Fraction(str(alpha))


def test_the_grow_policy_holds_alpha_on_simulated_null_candidates() -> None:
    """The whole policy — gate at α/2; if provisional grow and gate at α/4, at most twice — on
    800 null candidates at tau2-like per-task rates: false accepts within α (a one-sided
    binomial test at 0.001). benchmarks/grow_calibration.py runs the same with 4000."""
    from scipy import stats as sps

    from pytest_capevolve import _stats as stats

    rng = np.random.default_rng(14)
    rates = rng.choice([0.0, 0.05, 0.2, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0], size=30)
    schedule = look_schedule(0.05, 3)
    accepted = 0
    n = 800
    for _ in range(n):
        best = (rng.random((30, 15)) < rates[:, None]).astype(float)
        cand = (rng.random((30, 15)) < rates[:, None]).astype(float)
        for look, level in enumerate(schedule, start=1):
            c, b = cand[:, : 5 * look], best[:, : 5 * look]
            if stats.sign_flip_test(c, b, alpha=float(level)).at_most(level):
                accepted += 1
                break
            if not np.mean(c.mean(axis=1) - b.mean(axis=1)) > 0:
                break
    assert sps.binomtest(accepted, n, 0.05, alternative="greater").pvalue > 0.001, accepted
