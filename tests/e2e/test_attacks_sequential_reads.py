"""What a sequential gate (``--capevolve-sequential``) reads, against what a fixed gate reads: the first
``num_trials`` of each task, whatever a grow added since."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from run_log import rollout_files

from pytest_capevolve._cli.main import main


def _c7_provisional(example, projects, capevolve) -> Path:
    """noisy_agent at one trial with growth on, ``c7`` (a no-op that lands provisional) gated against
    the seed, and ``d1`` (another no-op) waiting in candidates/: the project."""
    project = example("noisy_agent", "untouched")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    projects.edit_spec(project, "max_metric_calls: 20000", "max_metric_calls: 20000\ngrow_max_looks: 2")
    for tag, line in (("c7", ""), ("d1", "Greet the customer by name.")):  # no RULE: the same agent
        shutil.copytree(project / "capability", project / "candidates" / tag)
        with (project / "candidates" / tag / "prompt.md").open("a") as handle:
            handle.write(f"\n{line}\n")
    assert capevolve(project, "c7", gate=True).ret == 13  # provisional: a grow is left
    return project


def _d1_sequential(projects, capevolve, project: Path) -> dict:
    """``d1`` gated sequentially against the seed: its verdict."""
    assert capevolve(project, "d1", gate=True, extra=["--capevolve-sequential"]).ret in (0, 10, 11, 12)
    return json.loads((projects.run_dir(project) / "verdicts" / "d1.json").read_text())


@pytest.mark.attack(
    "session-runs",
    attack=(
        "a grow (`--capevolve-grow c7`) adds trials beyond `num_trials` to the best as well as to the "
        "candidate; a later sequential gate of another candidate fed its e-processes every persisted trial "
        "of the best (the mean of two against the candidate's one), while its verdict's numbers read the "
        "first: the optimizer, having seen the best's extra trials, could choose the sequential gate when "
        "they came out low"
    ),
    outcome=(
        "prevented: the sequential gate reads the first `num_trials` of each task, as a fixed gate does; "
        "its decision is the one it makes without the grow"
    ),
)
def test_a_grown_best_moves_no_later_sequential_gate(example, projects, capevolve):
    """One run after c7's gate, copied (a project is its own wherever it lives): in the copy c7 is
    grown (a grow adds a trial to it and to the best, the seed); d1's sequential verdict is the
    same in both."""
    project = _c7_provisional(example, projects, capevolve)
    copy = project.parent / "grown"
    shutil.copytree(project, copy, symlinks=True)
    assert capevolve(copy, extra=["--capevolve-candidate", "c7", "--capevolve-grow"]).ret in (0, 10, 13)
    seed_trials = [
        path
        for path in rollout_files(projects.run_dir(copy), "seed")
        if json.loads(path.read_text())["trial"] == 1
    ]
    assert seed_trials, "the grow paid a second trial of the best"
    untouched = _d1_sequential(projects, capevolve, project)
    grown = _d1_sequential(projects, capevolve, copy)
    keys = ("decision", "basis", "delta_mean", "p_value")
    assert {k: grown[k] for k in keys} == {k: untouched[k] for k in keys}
    assert grown["details"]["sequential"] == untouched["details"]["sequential"]


@pytest.mark.attack(
    "laundering",
    attack=(
        "a sequential gate's verdict (`--capevolve-commit none`: reject, no crossing over 40 tasks) edited so "
        "its `details.sequential` says an efficacy stop (e-value 10⁶) and its decision accept, then "
        "`capevolve commit TAG --decision accept`: no reader re-derives a sequential verdict's e-values from "
        "the rollouts (`capevolve gate` answers with the fixed-n gate, a what-if)"
    ),
    outcome=(
        "refused: the verdict file is read held to the sha256 its `verdict` event logged, so only the session "
        "that decided can have written its numbers (commit exit 2, `verify` names it, `capevolve gate` a "
        "what-if, exit 14); changing them needs the log forged, which `verify --anchor` names"
    ),
)
def test_an_edited_sequential_verdict_is_never_booked(example, projects, capevolve, capsys):
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    shutil.copytree(project / "capability", project / "candidates" / "d1")
    with (project / "candidates" / "d1" / "prompt.md").open("a") as handle:
        handle.write("\nGreet the customer by name.\n")
    extra = ["--capevolve-sequential", "--capevolve-commit", "none"]
    assert capevolve(project, "d1", gate=True, extra=extra).ret == 10
    path = projects.run_dir(project) / "verdicts" / "d1.json"
    verdict = json.loads(path.read_text())
    assert verdict["decision"] == "reject" and verdict["details"]["sequential"]["outcome"] == "undecided"
    verdict["decision"], verdict["basis"] = "accept", "efficacy"
    verdict["details"]["sequential"].update(outcome="efficacy", e_efficacy=1e6, tasks_seen=12)
    path.write_text(json.dumps(verdict))
    said = {}
    for argv in (["commit", "d1", "--decision", "accept"], ["verify"], ["gate", "d1"]):
        capsys.readouterr()
        code = main([*argv, "--project", str(project)])
        said[argv[0]] = (code, "".join(capsys.readouterr()))
    assert said["commit"][0] == 2 and "verdicts/d1.json: not the verdict the gate wrote" in said["commit"][1]
    assert said["verify"][0] == 1 and "MISMATCH verdicts/d1.json" in said["verify"][1]
    assert said["gate"][0] == 14 and "WHAT-IF" in said["gate"][1] and "ACCEPT" not in said["gate"][1]
    events = [json.loads(line) for line in (path.parent.parent / "events.jsonl").read_text().splitlines()]
    assert [e for e in events if e["kind"] == "decision" and e["tag"] == "d1"] == []  # nothing booked
