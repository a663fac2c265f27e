"""`capevolve spend`: spend against every ceiling, whether N siblings fit, and stop / narrow /
continue — from real sessions on copies of the examples; and the pure `afford` a planner reuses."""

from __future__ import annotations

import pytest

from pytest_capevolve._cli.main import main
from pytest_capevolve._policy.budget.spend import Ceilings, afford


def test_spend_refuses_with_one_line_and_exit_2(example, capsys, tmp_path):
    project = example("toy_calc")
    assert main(["spend", str(project)]) == 4  # no run yet: a usage error, as in every command
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no run" in err[0] and err[0].startswith("error: ")
    assert main(["spend", "--project", str(project), "--n-siblings", "0"]) == 2
    assert main(["spend", str(project), "--project", str(tmp_path)]) == 4
    assert "two projects" in capsys.readouterr().err


# -- the pure function -----------------------------------------------------------------------------


def test_afford_is_unknown_without_data_and_names_every_ceiling_it_crosses():
    none_yet = afford(100, rollouts_spent=0, runner_usd_spent=0.0, ceilings=Ceilings(max_usd=1.0))
    assert none_yet.affordable == "unknown" and none_yet.usd_per_rollout is None

    ceilings = Ceilings(max_metric_calls=150, max_usd=1.0, max_iterations=3, stall=2)
    crossed = afford(
        100,
        rollouts_spent=100,
        runner_usd_spent=0.6,
        ceilings=ceilings,
        decisions_needed=2,
        iterations=2,
        stall=2,
    )
    assert crossed.affordable is False
    assert [b["ceiling"] for b in crossed.blockers] == [
        "max_metric_calls",
        "max_usd",
        "max_iterations",
        "stall",
    ]
    assert crossed.usd_needed == pytest.approx(0.6)  # measured $0.006 per rollout × 100

    fits = afford(50, rollouts_spent=100, runner_usd_spent=0.2, ceilings=ceilings, iterations=0, stall=0)
    assert fits.affordable is True and fits.blockers == []
    # an optimizer's measured $/decision counts against max_usd too
    costly = afford(
        50, rollouts_spent=100, runner_usd_spent=0.2, ceilings=ceilings, decisions_needed=1,
        optimizer_usd_per_decision=0.9,
    )  # fmt: skip
    assert costly.affordable is False and costly.blockers[0]["ceiling"] == "max_usd"


def test_a_stop_condition_cap_tightens_the_spec_ceiling():
    from pytest_capevolve._policy.stop.stop_condition import parse

    class FakeSpec:
        max_metric_calls, max_usd, max_iterations, stall = 1000, 10.0, None, None

    ceilings = Ceilings.from_spec(FakeSpec(), parse("$2, 5000 rollouts, 3 rejects in a row"))  # type: ignore[arg-type]
    assert (ceilings.max_usd, ceilings.max_metric_calls, ceilings.stall) == (2.0, 1000, 3)
    result = afford(100, rollouts_spent=100, runner_usd_spent=1.5, ceilings=ceilings)
    assert result.blockers[0]["source"] == "stop_condition '$2'"
    assert "(from stop_condition '$2')" in result.blockers[0]["message"]


def test_a_stop_conditions_measured_value_reads_as_a_person_writes_it() -> None:
    """`spend --table` printed "unmet (actual 0.8400000000000001)" (a new user's trial)."""
    from pytest_capevolve._policy.budget.spend import _plain_number

    assert _plain_number(0.1 * 8.4) == "0.84" and _plain_number(3) == 3 and _plain_number("x") == "x"
