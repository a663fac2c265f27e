"""`capevolve spend`: spend against every ceiling, whether N siblings fit, and stop / narrow /
continue — from real sessions on copies of the examples; and the pure `afford` a planner reuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main
from pytest_capevolve._project.way_on import shown
from pytest_capevolve._store.rundir import RunDir


@pytest.fixture
def spend(capsys):
    """``spend(project, *args) -> dict``: run `capevolve spend` and read its one JSON object."""

    def run(project: Path, *args: str) -> dict:
        capsys.readouterr()
        assert main(["spend", str(project), *args]) == 0
        out = capsys.readouterr().out
        assert out.count("\n") == 1  # one JSON object, one line
        return json.loads(out)

    return run


def evaluated(capevolve, project: Path, *candidates: str, gate: bool = False) -> None:
    result = capevolve(project, *candidates, gate=gate)
    assert result.ret in (0, 10), result.stdout.str()


def test_before_any_rollout_affordability_is_unknown_never_yes(example, projects, capevolve, spend):
    project = example("toy_calc")
    assert capevolve(project, extra=["--collect-only"]).ret == 0  # a run with frozen splits, nothing paid

    report = spend(project, "--n-siblings", "2")
    a = report["afford"]
    assert a["affordable"] == "unknown" and a["blockers"] == []
    assert a["usd_per_rollout"] is None and a["runner_spend_metered"] is None
    # 12 val tasks × 1 trial: two siblings, two null controls, and the best itself (not evaluated)
    assert a["rollouts"] == {"siblings": 24, "null_controls": 24, "best": 12, "total": 60}
    assert report["spent"]["rollouts"] == 0 and report["best"]["val_mean"] is None
    assert report["best"]["full_val"] is False


def test_before_the_first_decision_spend_names_the_level_the_loops_gate_takes(
    one_trial_baseline, projects, capevolve, spend, capsys
):
    """The playbook's step 3, `capevolve spend` right after `capevolve baseline`, said "the next gets
    α = 0.05 (constant)" while baseline said addis at 1/64, and the gate of the work copy that
    followed was taken at 1/64: the loop planned against a level its gate never used. spend reads
    the run as the hand-off does (the loop's schedule, unless the spec names one) and says, as
    baseline does, that a one-shot gate would freeze constant instead."""
    project = one_trial_baseline
    report = spend(project)
    assert report["resolution"]["how"].startswith("gate_alpha_schedule addis"), report["resolution"]
    assert "constant" in report["schedule"]

    assert main(["work", "new", "cand", str(project)]) == 0
    work = RunDir(projects.run_dir(project)).work_dir("cand")
    (work / "notes.md").write_text("a changed candidate\n")
    result = capevolve(project, work, gate=True, extra=["--capevolve-commit", "none"])
    assert result.ret in (0, 10), result.stdout.str()[-2000:]
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "cand.json").read_text())
    assert verdict["alpha_budget"]["alpha_j"] == pytest.approx(report["resolution"]["level"])


def test_siblings_that_would_cross_a_ceiling_are_not_affordable(example, projects, capevolve, spend, capsys):
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    evaluated(capevolve, project)  # the seed: 40 val tasks × 2 trials at $0.0021 each
    projects.edit_spec(project, "max_metric_calls: 20000", "max_metric_calls: 330")

    one = spend(project)
    assert one["spent"]["rollouts"] == 80 and one["spent"]["runner_usd"] == pytest.approx(0.168)
    assert one["spent"]["runner_spend_metered"] is True
    assert one["afford"]["rollouts"] == {"siblings": 80, "null_controls": 160, "best": 0, "total": 240}
    assert one["afford"]["affordable"] is True
    assert one["afford"]["usd_needed"] == pytest.approx(240 * 0.0021)
    assert one["ceilings"]["max_metric_calls"] == {
        "used": 80, "limit": 330, "fraction": round(80 / 330, 6), "reached": False, "counts": "rollouts paid"
    }  # fmt: skip

    two = spend(project, "--n-siblings", "2")
    assert two["afford"]["affordable"] is False
    [blocker] = two["afford"]["blockers"]
    assert blocker["ceiling"] == "max_metric_calls" and blocker["used"] == 80 and blocker["needed"] == 320
    assert "80 + 320 rollouts > max_metric_calls=330" in blocker["message"]
    assert two["recommendation"]["action"] == "narrow_scope"  # one sibling fits, two do not

    # the $ ceiling, at this run's measured $/rollout: 0.168 spent + 240 × 0.0021 > 0.5
    projects.edit_spec(project, "max_metric_calls: 330", "max_metric_calls: 20000\nmax_usd: 0.5")
    report = spend(project)
    assert report["afford"]["affordable"] is False
    assert [b["ceiling"] for b in report["afford"]["blockers"]] == ["max_usd"]
    assert report["recommendation"]["action"] == "stop"
    assert "max_usd" in report["recommendation"]["reason"]

    capsys.readouterr()
    assert main(["spend", str(project), "--table"]) == 0
    table = capsys.readouterr().out
    assert "affordable: NO" in table and "blocked by max_usd" in table


def test_a_zero_cost_adapter_is_unmetered_not_free(example, projects, capevolve, spend):
    project = example("toy_calc")  # its rollouts report no cost
    evaluated(capevolve, project)
    report = spend(project)
    assert report["spent"]["rollouts"] == 12 and report["spent"]["runner_usd"] == 0
    assert report["spent"]["runner_spend_metered"] is False
    assert report["afford"]["runner_spend_metered"] is False
    assert report["afford"]["affordable"] is True  # no $ ceiling to check: only rollouts count
    assert any("unmetered, not free" in n and "max_metric_calls" in n for n in report["afford"]["notes"])

    with (project / "capevolve.yaml").open("a") as handle:
        handle.write("max_usd: 1.0\n")
    assert spend(project)["afford"]["affordable"] == "unknown"  # $0 per rollout proves nothing


def test_constraints_and_the_goal_on_full_val_say_stop(example, projects, capevolve, spend):
    project = example("toy_calc")
    evaluated(capevolve, project)
    with (project / "capevolve.yaml").open("a") as handle:
        handle.write("stop_condition: 'val mean >= 0.2, 1000 rollouts; when it is good enough'\n")
    report = spend(project)
    mean = report["best"]["val_mean"]
    assert report["best"]["full_val"] is True and mean >= 0.2
    goal, cap = report["constraints"]["predicates"]
    assert goal["kind"] == "val_mean" and goal["met"] is True and goal["actual"] == mean
    assert cap["kind"] == "rollouts" and cap["met"] is False and cap["actual"] == 12
    assert report["constraints"]["ambiguous"][0]["clause"] == "when it is good enough"
    assert report["recommendation"]["action"] == "stop"
    assert "goal met on full val" in report["recommendation"]["reason"]
    assert "could not be read" in report["recommendation"]["reason"]


def test_optimizer_spend_from_commits_and_a_nearly_spent_ceiling_narrows(example, projects, capevolve, spend):
    project = example("toy_calc")
    evaluated(capevolve, project)
    with (project / "capevolve.yaml").open("a") as handle:
        handle.write("max_iterations: 5\nmax_usd: 10\n")
    rundir = RunDir(projects.run_dir(project))
    # what the lead's `commit` books: a decision line per tag and cumulative optimizer spend
    for tag in ("a", "b", "c", "d"):
        rundir.log.append_event(
            "decision", tag=tag, gated_against="seed", decision="reject", basis="gate", note="",
            optimizer_usd=0.5, optimizer_tokens=1000, optimizer_seconds=30,
        )  # fmt: skip

    def booked(state: dict) -> None:
        state["iterations"], state["stall"] = 4, 4
        state["spent"].update(optimizer_usd=2.0, optimizer_tokens=4000, optimizer_seconds=120)

    rundir.state.update_state(booked)
    report = spend(project)
    assert report["spent"]["optimizer_usd"] == 2.0 and report["spent"]["optimizer_tokens"] == 4000
    assert report["spent"]["total_usd"] == 2.0 and report["spent"]["decisions"] == 4
    assert report["ceilings"]["max_iterations"]["fraction"] == pytest.approx(0.8)
    assert report["ceilings"]["max_usd"]["used"] == 2.0  # runner $0 + optimizer $2
    assert report["afford"]["optimizer_usd_per_decision"] == 0.5
    assert report["recommendation"]["action"] == "narrow_scope"
    assert "max_iterations 80% spent" in report["recommendation"]["reason"]

    two = spend(project, "--n-siblings", "2")
    assert [b["ceiling"] for b in two["afford"]["blockers"]] == ["max_iterations"]

    rundir.log.append_event(
        "decision", tag="e", gated_against="seed", decision="reject", basis="gate", note=""
    )
    rundir.state.update_state(lambda s: s.update(iterations=5, stall=5))  # a view: only as the log says
    report = spend(project)
    assert report["budget_exhausted"] is True and report["recommendation"]["action"] == "stop"


# -- the pure function -----------------------------------------------------------------------------


def test_a_finalized_run_says_stop_whatever_the_budget(example, capevolve, spend):
    project = example("toy_calc")
    evaluated(capevolve, project)
    assert spend(project)["recommendation"]["action"] == "continue"
    assert capevolve(project, finalize=True).ret == 0  # the test split is scored: no gate runs here
    r = spend(project)["recommendation"]
    assert r["action"] == "stop" and "is finalized" in r["reason"] and "--capevolve-new-run" in r["reason"]
    assert f"--capevolve-run {shown(project)} --capevolve-new-run" in r["reason"]  # pasteable, not PROJECT
