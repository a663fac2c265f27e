"""Subset screens and grow looks, as pure rules: which tasks a screen picks, when it may kill,
how α is split across looks, and the screen ledger's arithmetic."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._decide import screen
from pytest_capevolve._decide.alpha_budget import look_alpha, look_schedule, looks_record
from pytest_capevolve._decide.gate import decide
from pytest_capevolve._decide.verdict import ACCEPT, GateConfig
from pytest_capevolve._policy.gate.verdicts import Evidence
from pytest_capevolve._store.readers.evidence import index_records
from pytest_capevolve._store.rollouts.record import RolloutRecord

best_means = st.dictionaries(
    st.from_regex(r"t[0-9]{1,3}", fullmatch=True),
    st.sampled_from([0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    min_size=1,
    max_size=40,
)


@pytest.mark.parametrize(
    "n_val, tier, size", [(40, 1, 10), (40, 2, 20), (40, 3, 30), (12, 1, 6), (5, 1, 5), (41, 1, 11)]
)
def test_a_tier_screens_its_share_of_val_never_fewer_than_six_tasks(n_val, tier, size) -> None:
    assert screen.screen_size(n_val, tier) == size


def test_an_unknown_tier_is_refused() -> None:
    with pytest.raises(ValueError, match="tier must be one of 1, 2, 3"):
        screen.screen_size(40, 4)


@given(best_means, st.text(min_size=1, max_size=8), st.sampled_from(["a", "b"]))
def test_the_ladder_is_deterministic_a_permutation_and_nested_across_tiers(means, run_id, tag) -> None:
    order = screen.ladder(means, run_id, tag)
    assert order == screen.ladder(dict(reversed(list(means.items()))), run_id, tag)  # input order is no input
    assert sorted(order) == sorted(means)
    tiers = [screen.select(means, run_id, tag, tier) for tier in (1, 2, 3)]
    for lower, upper in itertools.pairwise(tiers):
        assert upper[: len(lower)] == lower  # climbing the ladder re-pays nothing


@given(best_means, st.text(min_size=1, max_size=8))
def test_failures_lead_and_every_third_slot_holds_a_pass(means, run_id) -> None:
    order = screen.ladder(means, run_id, "cand")
    fails = {t for t, m in means.items() if m < 0.5}
    passes = set(means) - fails
    if fails:
        assert order[0] in fails
    # a seeded holdout of passes: slot 3, 6, ... while passes remain
    for slot in range(2, len(order), 3):
        if passes - set(order[:slot]):
            assert order[slot] in passes
    # failures the best sometimes passes come before those it never passes
    ranked = [means[t] for t in order if t in fails]
    assert ranked == sorted(ranked, reverse=True)


def test_the_holdout_depends_on_the_run_and_the_candidate() -> None:
    means = {f"t{i:02d}": 1.0 for i in range(40)}
    picks = {tuple(screen.select(means, run, tag, 1)) for run in ("r1", "r2") for tag in ("a", "b")}
    assert len(picks) > 1


def test_a_screen_never_accepts_even_a_clear_win() -> None:
    best = np.zeros((10, 5))
    result = screen.decide_screen(np.ones((10, 5)), best, alpha=0.05)
    assert result.decision == screen.PROMOTE and result.basis == screen.NO_HARM
    assert "says nothing about an improvement" in result.reason


def test_proven_harm_kills_and_names_its_p() -> None:
    result = screen.decide_screen(np.zeros((8, 3)), np.ones((8, 3)), alpha=0.05)
    assert result.decision == screen.KILL and result.basis == screen.HARM
    assert result.p_harm_exact == "1/256" and result.delta_mean == -1.0


GATE = GateConfig(mode="exact", alpha=0.05, min_coverage=0.8)


@given(
    st.integers(0, 2**30),
    st.integers(6, 12),
    st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=3, max_size=3), min_size=24, max_size=24),
)
def test_a_ceiling_kill_means_no_completion_of_the_unscreened_tasks_is_accepted(
    seed, size, completion
) -> None:
    rng = np.random.default_rng(seed)
    n_val = 24
    best_full = (rng.random((n_val, 3)) < rng.random((n_val, 1))).astype(float)
    rows = sorted(rng.choice(n_val, size=size, replace=False).tolist())
    cand_subset = (rng.random((size, 3)) < 0.3).astype(float)
    result = screen.decide_screen(
        cand_subset, best_full[rows], alpha=1e-9, best_full=best_full, subset_rows=rows, gate=GATE
    )
    if result.basis != screen.CEILING:
        return
    full = np.array(completion)
    full[rows] = cand_subset
    ids = [f"t{i}" for i in range(n_val)]
    assert decide(full, best_full, tag="c", against="b", task_ids=ids, config=GATE).decision != ACCEPT


def test_the_ceiling_kills_a_candidate_that_cannot_catch_up() -> None:
    best_full = np.ones((40, 5))
    best_full[:10] = 0.0  # the best fails ten tasks; the candidate fails them too, and more
    cand = np.zeros((10, 5))
    result = screen.decide_screen(
        cand, best_full[:10], alpha=0.05, best_full=best_full, subset_rows=range(10), gate=GATE
    )
    assert result.decision == screen.KILL and result.basis == screen.CEILING
    assert "even if every unscreened task passed" in result.reason


def test_a_ceiling_kill_quotes_the_level_the_next_gate_decides_at() -> None:
    """Under an addis or lord schedule the gate's next decision gets less than the spec's α; the
    kill said α = 0.05 there. It is decided at the spec's α (no decision gets more) and quotes the
    next decision's level, which its p exceeds too."""
    best_full = np.ones((40, 5))
    best_full[:10] = 0.0
    cand = np.zeros((10, 5))
    level = Fraction(1, 64)
    result = screen.decide_screen(
        cand,
        best_full[:10],
        alpha=0.05,
        best_full=best_full,
        subset_rows=range(10),
        gate=GATE,
        gate_level=level,
    )
    assert result.decision == screen.KILL and result.basis == screen.CEILING
    assert f"> α = {float(level):.4g})" in result.reason and "α = 0.05" not in result.reason
    constant = screen.decide_screen(
        cand, best_full[:10], alpha=0.05, best_full=best_full, subset_rows=range(10), gate=GATE
    )
    assert constant.decision == result.decision and f"> α = {float(GATE.alpha):.4g})" in constant.reason


def test_the_ceiling_is_only_for_the_exact_gate() -> None:
    best_full = np.ones((40, 5))
    paired = GateConfig(mode="paired", k_se=1.0, min_coverage=0.8)
    result = screen.decide_screen(
        np.ones((10, 5)),
        np.ones((10, 5)),
        alpha=0.05,
        best_full=best_full,
        subset_rows=range(10),
        gate=paired,
    )
    assert result.decision == screen.PROMOTE and result.ceiling_p is None


def test_the_ledger_adds_up_and_says_when_screening_was_pure_overhead() -> None:
    events = [
        {"tag": "a", "screen": "tier1", "decision": "kill", "fired": 50, "full_val_rollouts": 200},
        {"tag": "b", "screen": "tier1", "decision": "promote", "fired": 50, "full_val_rollouts": 200},
    ]
    ledger = screen.ledger(events)
    assert (ledger["kills"], ledger["promotes"], ledger["fired"], ledger["saved"]) == (1, 1, 100, 200)
    assert ledger["net_rollouts"] == 100 and "saved 100" in ledger["verdict"]
    overhead = screen.ledger(
        [
            {"tag": t, "screen": "tier2", "decision": "promote", "fired": 60, "full_val_rollouts": 200}
            for t in "ab"
        ]
    )
    assert overhead["net_rollouts"] == -120
    assert overhead["verdict"].startswith("screening was pure overhead")
    assert screen.breakeven_kill_rate(50, 200) == 0.25
    # a screen run again (resumed: nothing more fired) counts once; a kill saves its full val once
    again = screen.ledger([*events, {**events[0], "fired": 0}])
    assert (again["kills"], again["saved"], again["fired"]) == (1, 200, 100)


@given(st.sampled_from(["0.05", "0.01", "0.25", "0.1"]), st.integers(1, 3))
def test_the_looks_spend_exactly_alpha_and_the_first_keeps_half_when_growth_is_on(alpha, looks) -> None:
    schedule = look_schedule(alpha, looks)
    assert len(schedule) == looks and sum(schedule) == Fraction(alpha)
    assert schedule[0] == (Fraction(alpha) if looks == 1 else Fraction(alpha) / 2)
    assert look_alpha(alpha, looks, looks) == schedule[-1]
    record = looks_record(alpha, 1, looks)
    assert record["schedule"] == [str(level) for level in schedule] and Fraction(
        record["decision_alpha"]
    ) == Fraction(alpha)


def test_a_look_outside_the_schedule_is_refused() -> None:
    with pytest.raises(ValueError):
        look_alpha(0.05, 3, 2)
    with pytest.raises(ValueError):
        look_schedule(0.05, 4)


def _records(tag: str, rewards: dict[str, list[float]]) -> list[RolloutRecord]:
    return [
        RolloutRecord("r", "val", task, tag, k, 100 + k, "h", reward=r, passed=r >= 0.5)
        for task, row in rewards.items()
        for k, r in enumerate(row)
    ]


def test_a_null_control_is_compared_with_a_grown_best_on_the_trials_both_have() -> None:
    # the best grown to 6 trials, its null control still at 2: t0–t1 are identical on both, so
    # the paired Δ̄ is 0 — not the 2-trial mean minus the best's 6-trial mean
    best = {"a": [1.0, 0.0, 0.0, 0.0, 0.0, 0.0], "b": [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]}
    null = {"a": [1.0, 0.0], "b": [1.0, 1.0]}
    by_tag = index_records(_records("seed", best) + _records("seed-null1", null))
    config = GateConfig(mode="exact", alpha=0.05)
    verdict = Evidence(by_tag, ["a", "b"], 6, lambda _tag: 0).judge("seed-null1", "seed", config)
    assert verdict.delta_mean == 0.0 and verdict.trials == 2
    assert verdict.coverage["best"] == 1.0  # the best's unpaired trials are not in the comparison
