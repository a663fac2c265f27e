"""The ``lord`` schedule (LORD++) keeps its promise whatever the loop accepts: at every decision
the α spent so far is at most α·max(1, accepts so far) — the bound behind its false-discovery
control — and before any accept its levels are basel's (issue 25, item 5)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_capevolve._decide import alpha_budget

ALPHA = Fraction(1, 20)


@settings(max_examples=150)
@given(
    st.lists(st.booleans(), min_size=1, max_size=120), st.sampled_from([Fraction(1, 20), Fraction(1, 100)])
)
def test_lord_spends_at_most_alpha_per_accept_at_every_decision(accepted, alpha):
    accepts: list[int] = []
    spent = Fraction(0)
    for j, accept in enumerate(accepted, start=1):
        level = alpha_budget.alpha_for("lord", alpha, j, accepts)
        assert 0 < level <= alpha
        spent += level
        if accept:
            accepts.append(j)
        assert spent <= alpha * max(1, len(accepts))
        if not accepts:  # a loop of nulls accepts one with probability ≤ α, as under basel
            assert level == alpha_budget.alpha_for("basel", alpha, j) and spent <= alpha
        assert level >= alpha_budget.alpha_for("basel", alpha, j)


@given(st.lists(st.integers(1, 60), max_size=8, unique=True), st.integers(61, 90))
def test_lord_earns_alpha_back_on_accepts_and_ignores_later_ones(accepts, decision):
    none = alpha_budget.alpha_for("lord", ALPHA, decision)
    earned = alpha_budget.alpha_for("lord", ALPHA, decision, accepts)
    # W₀ = α: the first accept earns nothing (its wealth was spent up front), each later one α
    assert earned >= none and (earned > none) == (len(accepts) >= 2)
    assert alpha_budget.alpha_for("lord", ALPHA, decision, [*accepts, decision, decision + 3]) == earned


def test_the_accepts_lord_earns_on_are_read_from_the_gate_decision_events():
    events = [
        {"kind": alpha_budget.DECISION_EVENT, "j": 1, "decision": "reject"},
        {"kind": alpha_budget.DECISION_EVENT, "j": 2, "decision": "accept"},
        {"kind": "null_gated", "j": 3, "decision": "accept"},
    ]
    assert alpha_budget.accepted_decisions(events) == [2]
    assert alpha_budget.round_alpha("lord", ALPHA, 2, 2, [2]) == sum(
        alpha_budget.alpha_for("lord", ALPHA, j, [2]) for j in (3, 4)
    )


def test_hill_climb_gates_with_the_loop_schedule_unless_the_spec_names_one(tmp_path):
    from pytest_capevolve._loop.hill_climb_options import Options, ini_overrides

    spec = tmp_path / "capevolve.yaml"
    spec.write_text("adapter: adapter.py:A\ncapability_path: capability\n")
    assert ini_overrides(Options(project=tmp_path), spec)["gate_alpha_schedule"] == alpha_budget.LOOP_SCHEDULE
    spec.write_text("adapter: adapter.py:A\ncapability_path: capability\ngate_alpha_schedule: constant\n")
    assert "gate_alpha_schedule" not in ini_overrides(Options(project=tmp_path), spec)  # the spec's wins
    assert alpha_budget.LOOP_SCHEDULE != "constant"


# -- addis: discarding the clear non-improvements (issue 39, item 5) ---------------------------------


@settings(max_examples=150)
@given(st.lists(st.sampled_from(["reject", "discard", "accept"]), min_size=1, max_size=80))
def test_addis_is_half_of_lord_on_the_clock_of_the_decisions_that_counted(outcomes):
    """A discarded decision (Δ̄ < 0) spends nothing and does not tick the clock: the j-th level
    is τ = 1/2 of LORD++'s (with addis's γ) at the place j has among the decisions that counted;
    before any accept, α·τ·γ_c, and the α spent on counted decisions is ≤ α·max(1, accepts)."""
    accepts: list[int] = []
    discarded: list[int] = []
    spent = Fraction(0)
    for j, outcome in enumerate(outcomes, start=1):
        level = alpha_budget.alpha_for("addis", ALPHA, j, accepts, discarded)
        clock = j - len(discarded)
        if not accepts:
            assert level == ALPHA * alpha_budget.ADDIS_TAU * alpha_budget._addis_gamma(clock)
        assert 0 < level < alpha_budget.ADDIS_TAU  # a level below τ: an accept has Δ̄ > 0, never discarded
        if outcome == "accept":
            accepts.append(j)
        elif outcome == "discard":
            discarded.append(j)
        if outcome != "discard":  # (levels are τ·LORD++'s: spent/τ ≤ α·max(1, accepts))
            spent += level
            assert spent / alpha_budget.ADDIS_TAU <= ALPHA * max(1, len(accepts))


def test_addis_gamma_is_a_spending_sequence_whose_first_level_is_two_to_the_minus_six():
    gammas = [alpha_budget._addis_gamma(i) for i in range(1, 3000)]
    assert all(a >= b for a, b in zip(gammas, gammas[1:], strict=False))  # non-increasing
    assert sum(gammas) < 1  # Σ ≤ 1 (the tail past 3000 is below 1 − this sum)
    assert alpha_budget.alpha_for("addis", ALPHA, 1) == Fraction(1, 64)  # six improved, none worse
    assert alpha_budget.alpha_for("addis", ALPHA, 5, discarded=[1, 2, 3, 4]) == Fraction(1, 64)


def exact_any_false_accept(schedule: str, decisions: int, counts_beyond_accept: Fraction) -> Fraction:
    """P(some null is accepted) over a loop of nulls, by an exact DP over the schedule's state
    (an independent reference: no simulation). Each null's p is uniform on [0, 1] (a continuous
    test), so it is accepted with probability α_j, and otherwise counts (is not discarded) with
    probability ``counts_beyond_accept`` − α_j (1/2 under addis: Δ̄ ≥ 0 ⇔ p ≤ 1/2)."""
    # state: the number of decisions discarded so far, before any accept; its probability
    states = {0: Fraction(1)}
    any_false = Fraction(0)
    for j in range(1, decisions + 1):
        nxt: dict[int, Fraction] = {}
        for dropped, prob in states.items():
            level = alpha_budget.alpha_for(schedule, ALPHA, j, (), range(1, dropped + 1))
            any_false += prob * level
            counts = counts_beyond_accept - level if schedule == "addis" else 1 - level
            nxt[dropped] = nxt.get(dropped, Fraction(0)) + prob * counts
            if schedule == "addis":
                nxt[dropped + 1] = nxt.get(dropped + 1, Fraction(0)) + prob * (1 - counts_beyond_accept)
        states = nxt
    return any_false


def test_addis_keeps_a_loop_of_nulls_from_any_false_accept_with_probability_alpha():
    """The exact DP over 100 decisions: addis ≤ α (nulls counted half the time, as a symmetric
    null's Δ̄ ≥ 0 is), and lord's, basel's Σ α_j, too. (Before an accept the levels depend only
    on how many decisions were discarded, so the DP keys its state by that count.)"""
    half = exact_any_false_accept("addis", 100, Fraction(1, 2))
    assert half <= ALPHA and float(half) > 0.02  # ≤ α, and not vacuously small
    lord = exact_any_false_accept("lord", 100, Fraction(1))
    assert lord <= ALPHA


def test_the_discards_are_read_from_the_gate_decision_events_and_checked_by_verify():
    events = [
        {"kind": alpha_budget.DECISION_EVENT, "j": 1, "decision": "reject", "discarded": True},
        {"kind": alpha_budget.DECISION_EVENT, "j": 2, "decision": "reject", "discarded": False},
        {"kind": alpha_budget.DECISION_EVENT, "j": 3, "decision": "reject"},
    ]
    assert alpha_budget.discarded_decisions(events) == [1]
    assert alpha_budget.is_discarded("addis", "-1/24", "reject")
    assert not alpha_budget.is_discarded("addis", "0", "reject")  # Δ̄ = 0 counts: the safe side
    assert not alpha_budget.is_discarded("lord", "-1/24", "reject")
    logged = [
        {**e, "seq": i, "tag": f"c{i}", "schedule": "addis", "alpha_j": float(level)}
        for i, (e, level) in enumerate(
            zip(
                events,
                [alpha_budget.alpha_for("addis", ALPHA, j, (), [1] if j > 1 else []) for j in (1, 2, 3)],
                strict=True,
            )
        )
    ]
    assert alpha_budget.slot_problems(logged, ALPHA) == []
    too_high = [*logged[:2], {**logged[2], "alpha_j": float(alpha_budget.alpha_for("addis", ALPHA, 1))}]
    assert len(alpha_budget.slot_problems(too_high, ALPHA)) == 1


def test_a_gate_session_under_addis_logs_a_negative_delta_as_discarded():
    from types import SimpleNamespace

    from pytest_capevolve._decide.verdict import Verdict
    from pytest_capevolve._session.gating import AlphaBudget

    spec = SimpleNamespace(gate_alpha_schedule="addis", gate_alpha=0.05)
    budget = AlphaBudget(spec, [], ["worse", "flat"], against="seed")  # type: ignore[arg-type]
    worse = Verdict("worse", "seed", "reject", "gate", "p > α", "exact", 0.8, delta_exact="-1/12")
    flat = Verdict("flat", "seed", "reject", "gate", "p > α", "exact", 0.8, delta_exact="0")
    assert budget.slot(worse)[0]["discarded"] is True
    assert budget.slot(flat)[0]["discarded"] is False
    lord = AlphaBudget(SimpleNamespace(gate_alpha_schedule="lord", gate_alpha=0.05), [], 1)  # type: ignore[arg-type]
    assert "discarded" not in lord.slot(worse)[0]  # other schedules' events are as they were
