"""The comparison of collected items with a session's plan (pure; the sessions that use it
are replayed in ``tests/e2e/test_attacks_plan_check.py``)."""

from __future__ import annotations

import pytest

from pytest_capevolve._session.plan_check import plan_problem

PLAN = ["val::a[x-t0]", "val::b[x-t0]", "val::c[x-t0]"]


def test_the_plan_itself_has_no_problem_in_either_mode() -> None:
    assert plan_problem(PLAN, list(PLAN), whole=True) is None
    assert plan_problem(PLAN, list(PLAN), whole=False) is None


@pytest.mark.attack(
    "session-runs",
    attack=(
        "a plugin that repeats an item, reverses the items, adds an item of its own, edits the plan "
        "object (`plan.persisted`) in a later `pytest_configure`, or drops items from its run-loop "
        "wrapper after collection"
    ),
)
def test_a_whole_plan_names_what_was_lost_gained_repeated_or_reordered() -> None:
    assert (
        plan_problem(PLAN, PLAN[:2], whole=True)
        == "1 of 3 planned rollouts not collected (first: 'val::c[x-t0]')"
    )
    gained = plan_problem(PLAN, [*PLAN, "fake"], whole=True)
    assert gained == "1 item(s) the plan does not hold (first: 'fake')"
    repeated = plan_problem(PLAN, [*PLAN, PLAN[0]], whole=True)
    assert repeated == "1 planned rollout(s) collected more than once (first: 'val::a[x-t0]')"
    assert (
        plan_problem(PLAN, PLAN[::-1], whole=True) == "the planned rollouts in another order than the plan's"
    )
    both = plan_problem(PLAN, [PLAN[0], PLAN[0], "fake"], whole=True)
    assert (
        both is not None and "not collected" in both and "more than once" in both and "does not hold" in both
    )


@pytest.mark.attack(
    "session-runs",
    attack="a plugin that repeats an item of a session that decides nothing (paid twice)",
)
def test_a_subset_may_drop_and_reorder_but_never_gain_or_repeat() -> None:
    assert plan_problem(PLAN, [PLAN[2], PLAN[0]], whole=False) is None  # -k, a shuffling plugin
    assert plan_problem(PLAN, [], whole=False) is None
    assert "more than once" in (plan_problem(PLAN, [PLAN[0], PLAN[0]], whole=False) or "")
    assert "does not hold" in (plan_problem(PLAN, ["test::z[x-t0]"], whole=False) or "")
