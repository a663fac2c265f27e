"""The tamper guard: a candidate that changes what scores it is indecisive and costs nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from run_log import paid_tags

SCORER = "def grade(output):\n    return 1.0 if output == 'resolved' else 0.0\n"


@pytest.fixture
def project_with_scorer_in_capability(example, projects) -> Path:
    """noisy_agent whose capability folder carries its scorer, as cap-evolve projects often do."""
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    (project / "capability" / "scorer.py").write_text(SCORER)
    improved = project / "candidates" / "improved"
    (improved / "scorer.py").write_text(SCORER)
    tampered_dir = project / "candidates" / "lenient"
    shutil.copytree(improved, tampered_dir)
    (tampered_dir / "scorer.py").write_text("def grade(output):\n    return 1.0\n")
    return project


@pytest.fixture
def rollout_tags(projects) -> Callable[[Path], set[str]]:
    """``rollout_tags(project)``: the tags with a persisted val rollout in the newest run."""

    def tags(project: Path) -> set[str]:
        return set(paid_tags(projects.run_dir(project)))

    return tags


@pytest.mark.attack(
    "harness",
    attack="a candidate that edits the scorer, or holds a symlink leaving its folder",
    outcome="refused: indecisive, nothing paid",
)
def test_a_candidate_editing_the_scorer_is_indecisive_and_pays_nothing(
    project_with_scorer_in_capability, projects, capevolve, rollout_tags, xdist_args
):
    project = project_with_scorer_in_capability
    # no null controls: what is asked is the tampered candidate's verdict, and that the honest one
    # beside it is judged and booked (two copies of the seed paid 160 rollouts no assertion reads)
    nulls = ["--capevolve-null", "0"]
    result = capevolve(project, "improved", "lenient", gate=True, extra=[*xdist_args, *nulls])
    assert result.ret == 11, result.stdout.str()
    result.stdout.fnmatch_lines(["*lenient*INDECISIVE*never scored*scorer.py (changed)*"])
    rundir = projects.run_dir(project)
    verdict = json.loads((rundir / "verdicts" / "lenient.json").read_text())
    assert verdict["decision"] == "indecisive" and verdict["basis"] == "tamper"
    assert verdict["details"]["changed_paths"] == ["scorer.py (changed)"]
    assert verdict["n_tasks"] == 0 and verdict["delta_mean"] is None
    assert "lenient" not in rollout_tags(project)
    assert not (rundir / "candidates" / "lenient").exists()
    # the honest candidate beside it was judged as usual and became the best
    assert json.loads((rundir / "verdicts" / "improved.json").read_text())["decision"] == "accept"
    assert json.loads((rundir / "state.json").read_text())["best_id"] == "improved"


@pytest.mark.attack(
    "harness",
    attack="a candidate that edits the scorer, or holds a symlink leaving its folder",
)
def test_a_symlink_leaving_the_candidate_is_indecisive_even_without_protected_paths(
    pytester, example, projects, capevolve, rollout_tags
):
    """In process (a candidate refused before its rollouts under xdist: the test above)."""
    project = example("toy_calc")
    secret = pytester.path / "answers-outside.txt"
    secret.write_text("q01: 42\n")
    sneaky = project / "candidates" / "sneaky"
    shutil.copytree(project / "candidates" / "careful", sneaky)
    (sneaky / "notes.md").symlink_to(secret)
    result = capevolve(project, "sneaky")
    assert result.ret == 11, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*sneaky*INDECISIVE*refused: *is a symlink to*outside the candidate folder*"]
    )
    assert rollout_tags(project) == {"seed"}  # the best was evaluated; the candidate never was
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "sneaky.json").read_text())
    assert verdict["basis"] == "tamper" and verdict["rollouts"].startswith("none")
