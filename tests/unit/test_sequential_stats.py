"""The sequential gate's statistics: e-processes, the α split, the val-reuse schedules and the
calibration alarm, as pure functions and hypothesis properties."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_capevolve._decide import alpha_budget, calibration
from pytest_capevolve._decide import stopping as seqgate
from pytest_capevolve._project.spec import ALPHA_SCHEDULES
from pytest_capevolve._stats import sequential as seq
from pytest_capevolve.strategies import task_rates

REPLICATES = 4000
TRIALS = 5


def null_deltas(rates: np.ndarray, rng: np.random.Generator, shift: float = 0.0) -> np.ndarray:
    """Replicates × tasks of paired deltas between two arms drawn from the same rates."""
    shape = (REPLICATES, rates.size, TRIALS)
    cand = (rng.random(shape) < rates[None, :, None]).mean(axis=2)
    best = (rng.random(shape) < rates[None, :, None]).mean(axis=2)
    return cand - best + shift


def at_most_one(values: np.ndarray) -> None:
    """Mean over replicates ≤ 1 at every step, within 5 standard errors (simulation error)."""
    mean = values.mean(axis=0)
    se = values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])
    assert np.all(mean <= 1 + 5 * se + 1e-9), (mean.max(), se[mean.argmax()])


@settings(max_examples=25, deadline=None)
@given(rates=task_rates(min_tasks=2, max_tasks=40), seed=st.integers(0, 2**32 - 1))
def test_efficacy_e_process_is_a_supermartingale_on_null_arms(rates: np.ndarray, seed: int) -> None:
    paths = seq.efficacy_path(null_deltas(rates, np.random.default_rng(seed)))
    at_most_one(paths)


@settings(max_examples=25, deadline=None)
@given(
    rates=task_rates(min_tasks=2, max_tasks=40),
    seed=st.integers(0, 2**32 - 1),
    min_effect=st.sampled_from([0.0, 0.05, 0.2]),
)
def test_futility_e_process_is_a_supermartingale_when_the_effect_is_there(
    rates: np.ndarray, seed: int, min_effect: float
) -> None:
    # the futility null is "mean delta ≥ min_effect": null arms shifted up by exactly that much
    deltas = np.clip(null_deltas(rates, np.random.default_rng(seed), shift=min_effect), -1, 1)
    at_most_one(seq.futility_path(deltas, min_effect))


@settings(max_examples=20, deadline=None)
@given(
    rates=task_rates(min_tasks=5, max_tasks=40),
    seed=st.integers(0, 2**32 - 1),
    stop_at=st.floats(1.1, 10.0),
)
def test_optional_stopping_keeps_the_mean_and_the_error_bound(
    rates: np.ndarray, seed: int, stop_at: float
) -> None:
    """Stop each replicate the first time E ≥ stop_at (or at the end): E at that stopping time
    still has mean ≤ 1, and P(ever ≥ 1/α) ≤ α (Ville)."""
    paths = seq.efficacy_path(null_deltas(rates, np.random.default_rng(seed)))
    hit = paths >= stop_at
    stop = np.where(hit.any(axis=1), hit.argmax(axis=1), paths.shape[1] - 1)
    stopped = paths[np.arange(paths.shape[0]), stop]
    at_most_one(stopped[:, None])
    crossed = float(np.mean(paths.max(axis=1) >= 1 / 0.05))
    assert crossed <= 0.05 + 5 * np.sqrt(0.05 * 0.95 / REPLICATES)


def test_bets_are_predictable_and_bounded() -> None:
    """λ_i depends only on the past: changing x_i leaves λ_1 … λ_i alone; λ stays in [0, 0.9]."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 30)
    changed = x.copy()
    changed[10:] = 1.0
    assert np.array_equal(seq.bets(x)[:11], seq.bets(changed)[:11])
    assert seq.bets(x)[0] == 0.0  # no evidence, no stake
    all_good = seq.bets(np.ones(30))
    assert np.all((all_good >= 0) & (all_good <= seq.MAX_BET)) and all_good[-1] == seq.MAX_BET
    assert np.all(seq.efficacy_path(-np.ones(30)) > 0)  # never zero: a later task can still count


def test_a_clear_regression_crosses_futility_and_a_clear_gain_crosses_efficacy() -> None:
    worse = seq.run(np.full(40, -0.4), alpha_efficacy=0.005, alpha_futility=0.05, min_effect=0.05)
    better = seq.run(np.full(40, 0.4), alpha_efficacy=0.005, alpha_futility=0.05, min_effect=0.05)
    noise = seq.run(np.zeros(40), alpha_efficacy=0.005, alpha_futility=0.05, min_effect=0.05)
    assert worse.stopped == seq.FUTILITY and worse.futility >= 20 and worse.tasks < 20
    assert better.stopped == seq.EFFICACY and better.efficacy >= 200 and better.tasks < 20
    assert noise.stopped == seq.UNDECIDED and noise.efficacy == 1.0


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.floats(-1, 1), min_size=12, max_size=12), min_size=1, max_size=6))
def test_vectorized_crossings_agree_with_the_scalar_run(rows: list[list[float]]) -> None:
    deltas = np.array(rows)
    code, used = seq.first_crossings(deltas, alpha_efficacy=0.2, alpha_futility=0.2, min_effect=0.05)
    for i, row in enumerate(deltas):
        state = seq.run(row, alpha_efficacy=0.2, alpha_futility=0.2, min_effect=0.05)
        expected = {seq.EFFICACY: 1, seq.FUTILITY: -1, seq.UNDECIDED: 0}[state.stopped]
        assert code[i] == expected and used[i] == state.tasks


def test_alpha_levels_of_one_sequential_decision() -> None:
    levels = seqgate.split(0.05)
    assert (levels.alpha, levels.efficacy, levels.exhaustion) == (Fraction(1, 20),) * 3
    assert levels.futility == Fraction(1, 20)
    assert seqgate.split(Fraction(1, 60), Fraction(1, 2)).efficacy == Fraction(1, 120)


def test_the_joint_p_is_never_below_the_plain_sign_flip_share() -> None:
    """Crossing paths only add to the count: p_joint ≥ P(Σ ≥ observed) of the same resamples."""
    d = np.array([0.2, -0.2, 0.4, 0.0, 0.6, 0.2, -0.4, 0.8, 0.2, 0.4])
    low = seq.exhaustion_p(d, alpha_efficacy=1e-9, n_resamples=4000, seed=3)  # cannot cross
    high = seq.exhaustion_p(d, alpha_efficacy=0.5, n_resamples=4000, seed=3)  # crosses easily
    assert Fraction(*low) < Fraction(*high) <= 1
    assert seq.exhaustion_p(np.zeros(5), alpha_efficacy=0.05) == (1, 1)


def test_basel_schedule_never_spends_more_than_alpha() -> None:
    total = sum((alpha_budget.alpha_for("basel", 0.05, j) for j in range(1, 5001)), Fraction(0))
    assert total < Fraction(1, 20)
    assert alpha_budget.alpha_for("basel", 0.05, 1) < Fraction(1, 20) * Fraction(61, 100)
    assert alpha_budget.alpha_for("basel", 0.05, 2) == alpha_budget.alpha_for("basel", 0.05, 1) / 4
    assert alpha_budget.any_false_accept_bound("basel", 0.05, 200) <= 0.05
    assert alpha_budget.any_false_accept_bound("constant", 0.05, 200) == 1.0


def test_constant_schedule_is_todays_behaviour() -> None:
    assert all(alpha_budget.alpha_for("constant", 0.05, j) == Fraction(1, 20) for j in (1, 2, 200))
    assert alpha_budget.round_alpha("constant", 0.05, decided=7, siblings=3) == Fraction(1, 20)
    basel = alpha_budget.round_alpha("basel", 0.05, decided=2, siblings=2)
    assert basel == alpha_budget.alpha_for("basel", 0.05, 3) + alpha_budget.alpha_for("basel", 0.05, 4)


def test_schedule_names_are_one_list_and_bad_ones_refused() -> None:
    assert alpha_budget.SCHEDULES == ALPHA_SCHEDULES == ("constant", "basel", "lord", "addis")
    with pytest.raises(ValueError, match="use one of constant, basel"):
        alpha_budget.alpha_for("bonferroni", 0.05, 1)
    with pytest.raises(ValueError, match="numbered from 1"):
        alpha_budget.alpha_for("basel", 0.05, 0)


def test_mde_grows_as_alpha_shrinks_and_shrinks_with_more_tasks() -> None:
    a = alpha_budget.mde(0.05, 40, 0.3)
    assert a is not None and abs(a - (1.6449 + 0.8416) * 0.3 / 40**0.5) < 1e-3
    assert alpha_budget.mde(0.001, 40, 0.3) > a > alpha_budget.mde(0.05, 160, 0.3)


def test_calibration_alarm_sounds_only_for_a_tally_too_high_for_alpha() -> None:
    def events(accepts: int, n: int) -> list[dict]:
        """n nulls, ``accepts`` of them accepted, spread evenly over the run."""
        at = {j * n // accepts for j in range(accepts)}
        return [
            {"kind": calibration.NULL_EVENT, "decision": "accept" if i in at else "reject", "alpha": 0.05}
            for i in range(n)
        ]

    assert not calibration.calibration(events(0, 100), 0.05)["alarm"]
    assert not calibration.calibration(events(1, 2), 0.05)["alarm"]  # one lucky null in a round
    assert not calibration.calibration(events(7, 100), 0.05)["alarm"]
    loud = calibration.calibration(events(3, 4), 0.05)
    assert loud["alarm"] and "the gate is not holding its error rate on this project" in loud["text"]
    assert calibration.calibration([], 0.05) == {
        "nulls_gated": 0,
        "accepts": 0,
        "alpha": 0.05,
        "p_value": None,
        "e_value": None,
        "e_max": None,
        "alarm_level": None,
        "alarm": False,
        "text": "no null control gated yet",
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.sampled_from([0.05, 0.02, 0.1, 0.0125])), min_size=1, max_size=30)
)
def test_calibration_p_is_scipy_stats_binomial_tail_at_every_tally(nulls) -> None:
    """The alarm's p, computed from scipy.special (light to import), is scipy.stats's binomial
    tail P(X ≥ accepts) at the largest α gated so far: zero accepts included."""
    from scipy import stats as sps

    events = [
        {"kind": calibration.NULL_EVENT, "decision": "accept" if a else "reject", "alpha": alpha}
        for a, alpha in nulls
    ]
    accepts = sum(a for a, _ in nulls)
    largest = max(alpha for _, alpha in nulls)
    reference = float(sps.binom.sf(accepts - 1, len(nulls), largest))
    assert calibration.calibration(events, 0.05)["p_value"] == pytest.approx(reference, rel=1e-9, abs=1e-300)


def test_mde_is_the_normal_approximation_scipy_stats_gives() -> None:
    from scipy import stats as sps

    for alpha, n, sd, power in [(0.05, 40, 0.3, 0.8), (0.0031, 300, 0.12, 0.9), (0.4, 2, 1.0, 0.5)]:
        z = sps.norm.ppf(1 - alpha) + sps.norm.ppf(power)
        assert alpha_budget.mde(alpha, n, sd, power) == pytest.approx(z * sd / n**0.5, rel=1e-12)


def _crossed(kind: str) -> seqgate.SequentialDecision:
    state = seq.SequentialState(tasks=6, efficacy=300.0, futility=0.5, stopped=kind)
    return seqgate.SequentialDecision(state, seqgate.split(0.05), 0.05, total_tasks=40)


def test_an_efficacy_crossing_still_answers_to_the_null_floor_and_the_veto() -> None:
    from pytest_capevolve._decide.gate import decide
    from pytest_capevolve._decide.verdict import GateConfig

    cand = np.array([[1.0] * 5] * 7 + [[0.0] * 5])  # exact p = 9/256: accepted at 0.05
    best = np.array([[0.0] * 5] * 7 + [[1.0] * 5])
    ids = [f"t{i}" for i in range(8)]
    common = dict(tag="c", against="b", task_ids=ids, config=GateConfig())
    plain = seqgate.early_verdict(decide(cand, best, **common), _crossed(seq.EFFICACY))
    assert (plain.decision, plain.basis) == ("accept", "sequential_efficacy")
    assert plain.details["sequential"]["e_efficacy"] == 300.0 and plain.alpha == 0.05
    floored = decide(cand, best, null_deltas=[0.9], **common)  # nulls moved more than Δ̄ = 0.75
    assert seqgate.early_verdict(floored, _crossed(seq.EFFICACY)).basis == "null_floor"
    vetoed = seqgate.early_verdict(
        decide(cand, best, **common), _crossed(seq.EFFICACY), veto_regressions=True
    )
    assert (vetoed.decision, vetoed.basis) == ("reject", "regression_veto")  # t7 dropped 1 → 0
    exact_accept = decide(cand, best, **common)
    late = seqgate.exhausted_verdict(exact_accept, _crossed(seq.UNDECIDED), Fraction(3, 50))
    assert (late.decision, late.basis) == ("reject", "sequential_exhaustion")
    kept = seqgate.exhausted_verdict(exact_accept, _crossed(seq.UNDECIDED), Fraction(1, 50))
    assert kept.decision == "accept" and kept.details["sequential"]["p_joint_exact"] == "1/50"
    futile = seqgate.early_verdict(decide(best, cand, **common), _crossed(seq.FUTILITY))
    assert (futile.decision, futile.basis) == ("reject", "sequential_futility")
    waiting = seqgate.undecided_verdict(decide(cand, best, **common), _crossed(seq.UNDECIDED))
    assert waiting.decision == "undecided" and "never" not in waiting.reason and "300" in waiting.reason
