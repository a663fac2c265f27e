"""The spec's ceilings hold before anything is paid, with the arithmetic: max_usd at the run's
measured $/rollout, a stop_condition's cap, max_iterations and stall (which stop a gate session
but never a plain evaluation)."""

from __future__ import annotations

import json
import shutil

import pytest


def test_max_iterations_refuses_a_gate_session_before_paying(example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 1\nmax_iterations: 0")
    gated = capevolve(project, "careful", gate=True)
    assert gated.ret == pytest.ExitCode.USAGE_ERROR
    gated.stderr.fnmatch_lines(
        ["*would cross a ceiling before paying anything: 0 + 1 decisions > max_iterations=0*"]
    )
    assert not list(project.glob(".capevolve/runs/*/rollouts/*/*.json"))  # nothing paid
    assert capevolve(project, "careful").ret == 0  # measuring is not deciding


def test_stall_refuses_the_next_gate_session_after_that_many_rejects(example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 1\nstall: 1")
    shutil.copytree(project / "capability", project / "candidates" / "same")
    assert capevolve(project, "same", gate=True, extra=["--capevolve-null", "0"]).ret == 10
    state = json.loads((projects.run_dir(project) / "state.json").read_text())
    assert state["stall"] == 1
    paid = len(list(projects.run_dir(project).glob("rollouts/*/*.json")))
    again = capevolve(project, "careful", gate=True)
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    again.stderr.fnmatch_lines(["*1 rejects in a row: the run has stalled, stall=1*"])
    assert len(list(projects.run_dir(project).glob("rollouts/*/*.json"))) == paid


def test_max_usd_refuses_a_session_its_measured_cost_would_cross(example, projects, capevolve) -> None:
    """noisy_agent reports $0.0021 a rollout: the seed's 40 (one trial) cost $0.084; a gate
    session owing 120 more would reach $0.336 > max_usd 0.3, so it is refused before paying, not
    noticed after."""
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    projects.edit_spec(project, "max_metric_calls: 20000", "max_metric_calls: 20000\nmax_usd: 0.3")
    assert capevolve(project).ret == 0  # no rate measured yet: the first session may run
    state = json.loads((projects.run_dir(project) / "state.json").read_text())
    assert state["spent"]["usd"] == pytest.approx(0.084)
    gated = capevolve(project, "improved", gate=True)
    assert gated.ret == pytest.ExitCode.USAGE_ERROR
    gated.stderr.fnmatch_lines(["*$0.0840 spent + $0.2520 needed = $0.3360 > max_usd=0.3*"])
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["spent"] == state["spent"]


def test_a_stop_condition_cap_is_a_ceiling_too(example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 1\nstop_condition: at most 20 rollouts")
    assert capevolve(project).ret == 0  # 12 val rollouts
    refused = capevolve(project, "careful")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*12 + 12 rollouts > max_metric_calls=20 (from stop_condition*"])
