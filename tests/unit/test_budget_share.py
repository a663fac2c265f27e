"""A process's share of the ceilings: a rollout starts only once its cost is reserved, so the
share ends at most one rollout above its cap (pure bookkeeping, no session)."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._engine.budget_share import BudgetShare, Headroom, share_for


def test_an_unmeasured_tag_probes_alone_then_reserves_its_dearest_cost() -> None:
    share = BudgetShare(usd=0.05)
    assert share.reserve("a", "pricey", wait=False) is None  # the probe: nothing else in flight
    assert "unmeasured" in share.reserve("b", "pricey", wait=False)  # nothing beside it
    share.settle("a", "pricey", 0.01)
    for node in "bcde":  # $0.01 + 4 × $0.01 reserved = $0.05: fits exactly
        assert share.reserve(node, "pricey", wait=False) is None
    refused = share.reserve("f", "pricey", wait=False)
    assert refused is not None and "max_usd" in refused


def test_a_waiting_rollout_starts_once_those_in_flight_settle_cheaper() -> None:
    share = BudgetShare(usd=0.02, cost_by_tag={"t": 0.01})
    assert share.reserve("a", "t", wait=False) is None
    assert share.reserve("b", "t", wait=False) is None
    answer: list[str | None] = []
    waiter = threading.Thread(target=lambda: answer.append(share.reserve("c", "t", wait=True)))
    waiter.start()
    share.settle("a", "t", 0.0)  # an infra error books nothing: room for c
    waiter.join(timeout=30)
    assert answer == [None]


def test_each_worker_gets_an_equal_part_of_what_max_usd_leaves() -> None:
    assert share_for(Headroom(usd=0.09, workers=2)).usd == 0.045
    assert share_for(Headroom(usd=-0.01, workers=2)).usd == 0.0  # already over: nothing to start
    assert share_for(Headroom()).reserve("a", "t", wait=False) is None  # no ceiling: no share


@given(
    costs=st.lists(st.floats(min_value=0.0, max_value=0.05), min_size=1, max_size=40),
    cap=st.floats(min_value=0.0, max_value=0.3),
    width=st.integers(min_value=1, max_value=8),
)
def test_a_share_ends_at_most_one_rollout_above_its_cap_when_costs_are_a_tags_own(
    costs: list[float], cap: float, width: int
) -> None:
    """Every rollout of a tag costs the same (a tag's price): whatever the cap and the number
    in flight, what settles is at most the cap plus one rollout (the probe)."""
    price = costs[0]
    share = BudgetShare(usd=cap)
    in_flight: list[str] = []
    for n in range(len(costs)):
        while len(in_flight) >= width or (in_flight and share.reserve(f"r{n}", "t", wait=False) is not None):
            share.settle(in_flight.pop(0), "t", price)
        if f"r{n}" not in share.reserved and share.reserve(f"r{n}", "t", wait=False) is not None:
            break
        in_flight.append(f"r{n}")
    for node in in_flight:
        share.settle(node, "t", price)
    assert share.spent_usd <= cap + price + 1e-9
