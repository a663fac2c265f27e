"""Rounds as pure functions: the family levels, serial gating with re-gating, and the
family-wise false-accept rate of null siblings."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide.rounds import family_levels, gate_round
from pytest_capevolve._decide.verdict import ACCEPT, REJECT, GateConfig, Verdict

ALPHA = Fraction(1, 20)
p_values = st.lists(st.fractions(min_value=0, max_value=1, max_denominator=400), min_size=1, max_size=6)


def holm_by_definition(p: list[Fraction], alpha: Fraction) -> list[bool]:
    """Holm's step-down, straight from its definition."""
    k = len(p)
    order = sorted(range(k), key=lambda i: p[i])
    out = [False] * k
    for rank, i in enumerate(order):
        if p[i] > alpha / (k - rank):
            break
        out[i] = True
    return out


def bh_by_definition(p: list[Fraction], alpha: Fraction) -> list[bool]:
    k = len(p)
    ranked = sorted(p)
    r = max((r for r in range(1, k + 1) if ranked[r - 1] <= alpha * r / k), default=0)
    return [r > 0 and q <= ranked[r - 1] for q in p]


@given(p_values)
def test_holm_levels_decide_exactly_what_holm_decides(p):
    levels = family_levels(p, ALPHA, "holm")
    assert [q <= level for q, level in zip(p, levels, strict=True)] == holm_by_definition(p, ALPHA)


@given(p_values)
def test_bh_levels_decide_exactly_what_bh_decides(p):
    levels = family_levels(p, ALPHA, "bh")
    assert [q <= level for q, level in zip(p, levels, strict=True)] == bh_by_definition(p, ALPHA)


def test_no_correction_decides_each_at_alpha_and_one_sibling_is_never_corrected():
    assert family_levels([Fraction(1, 30)] * 3, ALPHA, "none") == [ALPHA] * 3
    assert family_levels([Fraction(1, 30)], ALPHA, "holm") == [ALPHA]
    assert family_levels([Fraction(1, 30)] * 3, ALPHA, "holm") == [ALPHA / 3] * 3


def binary_arm(rng: np.random.Generator, rates: np.ndarray, trials: int = 3) -> np.ndarray:
    return (rng.random((rates.size, trials)) < rates[:, None]).astype(float)


def exact_judge(arms: dict[str, np.ndarray]):
    """The exact rule alone (no bootstrap), as a round's judge: fast enough to simulate."""

    def judge(tag: str, against: str, config: GateConfig) -> Verdict:
        result = stats.sign_flip_test(arms[tag], arms[against], alpha=config.alpha)
        ok = result.at_most(config.alpha)
        return Verdict(
            tag=tag,
            against=against,
            decision=ACCEPT if ok else REJECT,
            basis="exact",
            reason=f"p = {result.p_value:.4g}",
            mode="exact",
            min_coverage=0.0,
            p_exact=f"{result.numerator}/{result.denominator}",
        )

    return judge


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


def planted(rng: np.random.Generator, rates: np.ndarray, lift: float) -> np.ndarray:
    return binary_arm(rng, np.clip(rates + lift, 0, 1), trials=5)


def test_after_an_accept_the_later_siblings_are_regated_against_the_new_best():
    rng = np.random.default_rng(7)
    rates = rng.uniform(0.1, 0.5, size=40)
    arms = {
        "best": planted(rng, rates, 0.0),
        "early_null": planted(rng, rates, 0.0),
        "first": planted(rng, rates, 0.45),
        "second": planted(rng, rates, 0.45),  # as good as `first`: no better than it
    }
    config = GateConfig(mode="exact", alpha=0.05)
    outcome = gate_round(exact_judge(arms), ["early_null", "first", "second"], "best", config, "holm")
    by_tag = {v.tag: v for v in outcome.verdicts}
    assert [v.tag for v in outcome.verdicts] == ["early_null", "first", "second"]
    assert by_tag["early_null"].against == "best" and by_tag["early_null"].decision == REJECT
    assert by_tag["first"].against == "best" and by_tag["first"].decision == ACCEPT
    assert by_tag["second"].against == "first"  # the second sibling met the new best
    assert "re-gated against 'first'" in by_tag["second"].reason
    assert by_tag["second"].decision == REJECT and outcome.best == "first"
    # each verdict says at which of Holm's levels (α/3, or α/2 for the second smallest p) it was decided
    family = by_tag["first"].details["family"]
    assert (family["method"], family["siblings"], family["alpha"]) == ("holm", 3, 0.05)
    assert family["level"] in (pytest.approx(0.05 / 3), pytest.approx(0.05 / 2))


@pytest.mark.parametrize("order", list(itertools.permutations(["x", "y"])))
def test_the_first_accepted_sibling_in_the_order_given_wins(order):
    rng = np.random.default_rng(11)
    rates = rng.uniform(0.1, 0.4, size=40)
    arms = {"best": planted(rng, rates, 0.0), "x": planted(rng, rates, 0.5), "y": planted(rng, rates, 0.5)}
    outcome = gate_round(exact_judge(arms), list(order), "best", GateConfig(alpha=0.05), "holm")
    assert outcome.best == order[0]
