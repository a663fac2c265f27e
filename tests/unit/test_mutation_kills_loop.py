"""Tests that kill mutants of the loop's decision code (``python benchmarks/mutation.py``).

The family levels of a round (Holm, BH, none) at their boundaries, a stage's re-deciding at
those levels, the verdict's stability and "directionally positive" fields, α as text, and the
sizes ``Evidence`` passes only to ``simplicity_tiebreak``. Every expected value is worked out
by hand in the comment beside it, never copied from a run.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import gate, rounds
from pytest_capevolve._decide.rounds import family_levels, gate_round
from pytest_capevolve._decide.verdict import ACCEPT, REJECT, GateConfig, Verdict
from pytest_capevolve._policy import verdicts as judging
from pytest_capevolve._store import evidence
from pytest_capevolve._store.record import RolloutRecord

F = Fraction
ALPHA = F(1, 20)
UNKNOWN = re.escape("unknown multiple-testing method 'bogus'; use one of holm, bh, none")


# -- family_levels: Holm ------------------------------------------------------------------------


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


# -- family_levels: Benjamini–Hochberg ----------------------------------------------------------


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


# -- a stage: the siblings re-decided at their family levels ------------------------------------


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
    assert out["a"].details["family"] == {"method": "holm", "siblings": 2, "alpha": 0.05, "level": 0.05}
    assert out["b"].details["family"] == {"method": "holm", "siblings": 2, "alpha": 0.05, "level": 0.025}
    assert out["a"].decision == out["b"].decision == ACCEPT
    assert out["a"].reason == "p = 1/32"  # at α itself: no family-rate note, no split
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
    assert out["b"].details["family"] == {"method": "none", "siblings": 3, "alpha": 0.05, "level": 0.05}


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


# -- decide: verdict_stable ---------------------------------------------------------------------

EXACT = GateConfig(mode="exact", alpha=0.05, min_coverage=0.0)


def decide(candidate, best, config=EXACT, **kw) -> Verdict:
    candidate, best = np.asarray(candidate, float), np.asarray(best, float)
    if candidate.ndim == 1:
        candidate, best = candidate[:, None], best[:, None]
    ids = [f"t{i}" for i in range(len(candidate))]
    return gate.decide(candidate, best, tag="cand", against="best", task_ids=ids, config=config, **kw)


def ups(n: int, lift: float = 1.0):
    """n tasks, each +lift (candidate lift, best 0)."""
    return [lift] * n, [0.0] * n


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


# -- decide: directionally_positive_but_inconclusive --------------------------------------------


def test_directionally_positive_means_a_positive_mean_that_was_not_accepted():
    assert decide(*ups(4)).directionally_positive_but_inconclusive is True  # p = 1/16: rejected
    assert decide(*ups(4, 0.5)).directionally_positive_but_inconclusive is True  # Δ̄ = 0.5 < 1
    assert decide(*ups(5)).directionally_positive_but_inconclusive is False  # accepted
    tie = decide([0.5] * 4, [0.5] * 4)  # Δ̄ = 0 exactly: not positive
    assert tie.decision == REJECT and tie.directionally_positive_but_inconclusive is False
    worse = decide([0.0] * 4, [1.0] * 4)
    assert worse.decision == REJECT and worse.directionally_positive_but_inconclusive is False


# -- alpha_text ---------------------------------------------------------------------------------


def test_alpha_text_is_a_plain_decimal_never_a_fraction_read_as_tasks():
    assert gate.alpha_text(0.05) == "0.05"
    plain = {1: "1", 2: "0.5", 4: "0.25", 5: "0.2", 10: "0.1", 20: "0.05", 25: "0.04"}
    plain |= {40: "0.025", 50: "0.02", 60: "0.01667", 100: "0.01", 1000: "0.001", 3: "0.3333"}
    plain |= {6: "0.1667", 11: "0.09091", 21: "0.04762", 101: "0.009901", 1001: "0.000999"}
    assert {d: gate.alpha_text(F(1, d)) for d in plain} == plain


def test_a_split_alpha_says_how_it_was_split():
    from pytest_capevolve._decide.rounds import split_text

    assert split_text(F(1, 20), F(1, 40), "holm") == "0.025 (0.05 / 2 by Holm)"
    assert split_text(F(1, 20), F(1, 30), "bh") == "0.03333 (0.05 × 2/3 by Benjamini-Hochberg)"


# -- Evidence: sizes only for simplicity_tiebreak -----------------------------------------------


def test_evidence_asks_for_snapshot_sizes_only_in_simplicity_tiebreak_mode():
    records = [
        RolloutRecord(
            run_id="r", split="val", task_id=f"t{i}", tag=tag, trial=0, seed=0, candidate_hash="h", reward=1.0
        )
        for tag in ("a", "b")
        for i in range(3)
    ]
    asked: list[str] = []
    ev = judging.Evidence(
        evidence.index_records(records), ["t0", "t1", "t2"], 1, lambda t: asked.append(t) or 5
    )
    for mode in ("exact", "strict", "paired"):
        ev.judge("a", "b", GateConfig(mode=mode))
    assert asked == []
    ev.judge("a", "b", GateConfig(mode="simplicity_tiebreak"))
    assert asked == ["a", "b"]


# -- reward_grid without any matrix -------------------------------------------------------------


def test_reward_grid_of_no_matrix_reads_no_value():
    """No matrix: no value to put on a grid, so grid 1. (Freeing an off-grid one-element array
    first means a stray uninitialised element would read as π/10, off every grid.)"""
    for _ in range(3):
        stray = np.array([math.pi / 10])
        del stray
        assert stats.reward_grid() == 1
