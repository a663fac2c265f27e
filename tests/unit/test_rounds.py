"""Rounds as pure functions: the family levels, serial gating with re-gating, and the
family-wise false-accept rate of null siblings."""

from __future__ import annotations

import itertools
import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import gate, rounds
from pytest_capevolve._decide.rounds import family_levels, gate_round
from pytest_capevolve._decide.verdict import ACCEPT, REJECT, GateConfig, Verdict

ALPHA = Fraction(1, 20)
F = Fraction
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


# -- family levels and a stage at their boundaries (each test kills a mutant: benchmarks/mutation.py)


ANY_COVERAGE = gate.GateConfig(min_coverage=0.0)


def judge(candidate, best, config=ANY_COVERAGE, **kw):
    candidate, best = np.asarray(candidate, float), np.asarray(best, float)
    ids = [f"t{i}" for i in range(len(candidate))]
    return gate.decide(candidate, best, tag="cand", against="best", task_ids=ids, config=config, **kw)


UNKNOWN = re.escape("unknown multiple-testing method 'bogus'; use one of holm, bh, none")


def table_judge(p_of: dict[str, Fraction | None], calls: list[tuple[str, str, object]]):
    """A judge with a fixed p per tag, accepting when p ≤ the α it is given (exactly); it
    records every call with the α it was called at."""

    def judge(tag: str, against: str, config: GateConfig) -> Verdict:
        calls.append((tag, against, config.alpha))
        p = p_of[tag]
        level = config.alpha if isinstance(config.alpha, Fraction) else Fraction(str(config.alpha))
        return Verdict(
            tag=tag,
            against=against,
            decision=ACCEPT if p is not None and p <= level else REJECT,
            basis=config.mode,
            reason=f"p = {p}",
            mode=config.mode,
            min_coverage=0.0,
            p_exact=None if p is None else f"{p.numerator}/{p.denominator}",
        )

    return judge


def test_holm_sorts_the_p_values_before_assigning_levels():
    # p = [1/25, 1/100]: the smaller (index 1) is first, at α/2 = 1/40 (1/100 ≤ 1/40 passes);
    # index 0 is second, at α/1 = 1/20 (1/25 ≤ 1/20 passes). In input order: [1/20, 1/40].
    assert family_levels([F(1, 25), F(1, 100)], ALPHA, "holm") == [F(1, 20), F(1, 40)]


def test_holm_with_two_p_values_between_half_alpha_and_alpha_rejects_both():
    # 3/100 > α/2 = 1/40: Holm stops at the first test, and the second gets the same 1/40
    assert family_levels([F(3, 100), F(4, 100)], ALPHA, "holm") == [F(1, 40), F(1, 40)]


def test_holm_a_p_value_exactly_at_its_level_passes_and_the_next_gets_the_next_level():
    # 1/40 ≤ α/2 = 1/40 passes (≤, not <), so the second is decided at α/1 = 1/20
    assert family_levels([F(1, 40), F(1, 20)], ALPHA, "holm") == [F(1, 40), F(1, 20)]


def test_holm_every_test_after_the_first_failure_gets_the_failing_level():
    # sorted: 1/100 at α/3 = 1/60 passes; 1/30 at α/2 = 1/40 fails (1/30 > 1/40): stop;
    # 1/2 gets 1/40 too. In input order [1/2, 1/100, 1/30]: [1/40, 1/60, 1/40].
    assert family_levels([F(1, 2), F(1, 100), F(1, 30)], ALPHA, "holm") == [F(1, 40), F(1, 60), F(1, 40)]


def test_two_p_values_are_corrected_and_none_is_not():
    assert family_levels([F(1, 100), F(1, 100)], ALPHA, "none") == [ALPHA, ALPHA]
    # k = 2 is corrected: α/2 for the first, α for the second (both pass)
    assert family_levels([F(1, 100), F(1, 100)], ALPHA, "holm") == [F(1, 40), F(1, 20)]
    assert family_levels([], ALPHA, "holm") == []


def test_bh_p_values_exactly_at_their_rank_levels_pass_at_the_largest_rank():
    # sorted [1/40, 1/20] against α·1/2 = 1/40 and α·2/2 = 1/20: both equal, both pass;
    # the largest passing rank is 2, so every level is α·2/2 = 1/20
    assert family_levels([F(1, 20), F(1, 40)], ALPHA, "bh") == [F(1, 20), F(1, 20)]


def test_bh_with_nothing_passing_decides_at_the_first_rank_level():
    # sorted [3/80, 1/16]: 3/80 > α·1/2 = 1/40 and 1/16 > α·2/2 = 1/20: no rank passes,
    # so the level is α·1/2 = 1/40 (which neither p meets)
    assert family_levels([F(1, 16), F(3, 80)], ALPHA, "bh") == [F(1, 40), F(1, 40)]


def test_bh_is_step_up_a_failing_small_rank_does_not_stop_a_larger_one():
    # sorted [1/50, 1/40, 1/25] against 1/60, 1/30, 1/20: rank 1 fails (1/50 > 1/60), ranks 2
    # and 3 pass; the largest passing rank 3 gives α·3/3 = 1/20 for all
    assert family_levels([F(1, 25), F(1, 50), F(1, 40)], ALPHA, "bh") == [ALPHA] * 3


def test_an_unknown_method_is_refused_by_name():
    with pytest.raises(ValueError, match=UNKNOWN):
        family_levels([F(1, 2), F(1, 3)], ALPHA, "bogus")
    with pytest.raises(ValueError, match=UNKNOWN):
        gate_round(lambda *a: None, ["a"], "best", GateConfig(), "bogus")


def test_a_stage_redecides_only_the_siblings_below_alpha_at_their_exact_holm_level():
    calls: list = []
    config = GateConfig(mode="exact", alpha=0.05)
    out = rounds._stage(
        table_judge({"a": F(1, 32), "b": F(1, 64)}, calls), ["a", "b"], "best", config, "holm"
    )
    # b (1/64) is first at α/2 = 1/40 and passes; a (1/32) is second at α = 1/20. Only b is
    # judged again, at 1/40 as a Fraction (0.05 read as 1/20, halved exactly, not 0.025 float)
    assert calls == [("a", "best", 0.05), ("b", "best", 0.05), ("b", "best", F(1, 40))]
    assert isinstance(calls[2][2], Fraction)
    family = {"method": "holm", "siblings": 2, "alpha": 0.05}
    assert out["a"].details["family"] == {**family, "level": 0.05, "level_exact": "1/20"}
    assert out["b"].details["family"] == {**family, "level": 0.025, "level_exact": "1/40"}
    assert out["a"].decision == out["b"].decision == ACCEPT
    # at α itself: no split, but the reason still names the family's rule and its level (a BH
    # top rank said only "p ≤ α = 0.05", as if no family were there)
    assert out["a"].reason == "p = 1/32; α = 0.05 by Holm, 2 siblings"
    assert out["b"].reason == "p = 1/64; α = 0.025 (0.05 / 2 by Holm), 2 siblings"


def test_a_fraction_alpha_is_used_exactly_and_split_three_ways():
    calls: list = []
    config = GateConfig(mode="exact", alpha=F(1, 20))
    p = {"a": F(1, 64), "b": F(1, 64), "c": F(1, 64)}
    out = rounds._stage(table_judge(p, calls), ["a", "b", "c"], "best", config, "holm")
    # ties keep the order given: a at 1/60, b at 1/40, c at 1/20 (all pass: 1/64 ≤ 1/60)
    assert calls[3:] == [("a", "best", F(1, 60)), ("b", "best", F(1, 40))]
    assert [out[t].details["family"]["level"] for t in "abc"] == [1 / 60, 1 / 40, 1 / 20]


def test_without_correction_each_sibling_is_at_alpha_and_the_reason_says_the_family_rate():
    calls: list = []
    config = GateConfig(mode="exact", alpha=F(1, 20))
    p = {"a": F(1, 64), "b": F(1, 2), "c": F(1, 64)}
    out = rounds._stage(table_judge(p, calls), ["a", "b", "c"], "best", config, "none")
    assert len(calls) == 3  # every level is α: nobody is judged again
    # 3 · 1/20 = 3/20, shown as 0.15
    assert out["a"].reason == "p = 1/64; 3 siblings each at α: the family rate is up to 0.15"
    assert out["b"].reason == "p = 1/2; 3 siblings each at α: the family rate is up to 0.15"
    assert out["b"].details["family"] == {
        "method": "none",
        "siblings": 3,
        "alpha": 0.05,
        "level": 0.05,
        "level_exact": "1/20",
    }


def test_a_sibling_without_an_exact_p_counts_as_p_one_and_is_not_judged_again():
    calls: list = []
    config = GateConfig(mode="exact", alpha=F(1, 20))
    out = rounds._stage(table_judge({"a": None, "b": None}, calls), ["a", "b"], "best", config, "holm")
    # both p = 1: the first fails α/2 = 1/40, so both are at 1/40; neither has a p to re-decide
    assert calls == [("a", "best", F(1, 20)), ("b", "best", F(1, 20))]
    assert [out[t].details["family"]["level"] for t in "ab"] == [0.025, 0.025]


def test_a_missing_p_is_exactly_one_not_worse():
    calls: list = []
    config = GateConfig(mode="exact", alpha=F(1))
    out = rounds._stage(table_judge({"a": None, "b": F(1, 2)}, calls), ["a", "b"], "best", config, "bh")
    # at α = 1, BH: sorted [1/2, 1] against 1·1/2 and 1·2/2: both pass (1 ≤ 1), so the largest
    # passing rank is 2 and every level is 1 = α: nobody is judged again
    assert len(calls) == 2
    assert [out[t].details["family"]["level"] for t in "ab"] == [1.0, 1.0]


def test_a_legacy_mode_and_a_lone_sibling_are_not_corrected():
    calls: list = []
    legacy = GateConfig(mode="strict", alpha=0.05)
    out = rounds._stage(table_judge({"a": None, "b": None}, calls), ["a", "b"], "best", legacy, "holm")
    assert len(calls) == 2 and all("family" not in v.details for v in out.values())
    calls.clear()
    exact = GateConfig(mode="exact", alpha=0.05)
    out = rounds._stage(table_judge({"a": F(1, 64)}, calls), ["a"], "best", exact, "holm")
    assert len(calls) == 1 and "family" not in out["a"].details


def test_a_split_alpha_says_how_it_was_split():
    from pytest_capevolve._decide.rounds import split_text

    assert split_text(F(1, 20), F(1, 40), "holm") == "0.025 (0.05 / 2 by Holm)"
    assert split_text(F(1, 20), F(1, 30), "bh") == "0.03333 (0.05 × 2/3 by Benjamini-Hochberg)"
