"""An owed rollout whose item ran and brought no record is recorded as an infra error in its place
(:mod:`pytest_capevolve._session.persistence`): which reports say so, and which rollout they name."""

from __future__ import annotations

import pytest

from pytest_capevolve._items.nodes import INFRA_PREFIX
from pytest_capevolve._items.plan import RolloutKey
from pytest_capevolve._session.persistence import ran_without_record, vanished_key


def _report(outcome: str, when: str, longrepr: str | None = None) -> pytest.TestReport:
    return pytest.TestReport(
        "capevolve.yaml::val::t1[quitter-t0]", ("x", None, "x"), {}, outcome, longrepr, when
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("outcome", "when", "longrepr", "ran"),
    [
        ("passed", "call", None, True),  # ran, its record dropped on the way
        ("failed", "call", "TypeError: raised while recording", True),
        ("failed", "setup", "a fixture raised", True),
        ("passed", "setup", None, False),  # the call's report says whether it ran
        ("passed", "teardown", None, False),
        ("skipped", "call", "capevolve: over budget", False),  # not started: still owed
        ("failed", "call", f"{INFRA_PREFIX}tasks() gave this worker other tasks", False),  # refused unpaid
        ("failed", "???", "worker 'gw0' crashed while running", False),  # crash-resume, as before
    ],
)
def test_only_a_report_of_an_item_that_ran_stands_for_a_vanished_rollout(
    outcome, when, longrepr, ran
) -> None:
    assert ran_without_record(_report(outcome, when, longrepr)) is ran


def test_the_vanished_rollout_is_found_by_the_tail_of_its_node_id() -> None:
    key = RolloutKey("val", "a::b", "quitter", 0)  # a task id may hold '::'
    keys = {"val::a::b[quitter-t0]": key, "val::b[quitter-t0]": RolloutKey("val", "b", "quitter", 0)}
    assert vanished_key("capevolve.yaml::val::a::b[quitter-t0]", keys) == key
    assert vanished_key("capevolve.yaml::val::c[quitter-t0]", keys) is None
