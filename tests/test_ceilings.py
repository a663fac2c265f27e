"""The spec's ceilings hold before anything is paid: max_iterations and stall stop a gate
session (with the arithmetic) but never a plain evaluation."""

from __future__ import annotations

import json
import shutil

import pytest


def test_max_iterations_refuses_a_gate_session_before_paying(example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 1\nmax_iterations: 0")
    gated = capevolve(project, "careful", gate=True)
    assert gated.ret == pytest.ExitCode.USAGE_ERROR
    gated.stderr.fnmatch_lines(["*booked 0 decision(s), max_iterations=0*"])
    assert not list(projects.run_dir(project).glob("rollouts/*/*.json"))  # nothing paid
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
    again.stderr.fnmatch_lines(["*1 reject(s) in a row, stall=1*"])
    assert len(list(projects.run_dir(project).glob("rollouts/*/*.json"))) == paid
