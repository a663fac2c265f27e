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
