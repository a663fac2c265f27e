"""A run dir belongs to its project wherever the project lives: a project that is moved, or
checked out by CI in another folder, continues its run there."""

from __future__ import annotations

import json
import shutil

import pytest


def test_a_moved_project_resumes_gates_and_finalizes_its_run(
    pytester: pytest.Pytester, improved_gated, projects, capevolve
) -> None:
    """In process: what a move changes is the project's folder, which every process of a session
    takes from its command line, the run dir beside it (xdist workers as the controller does; a
    session over xdist, and over remote-style workers on a copy of the project in another folder:
    tests/e2e/test_run_e2e.py)."""
    # noisy_agent at two trials, improved gated where it was built (a copy of one build per
    # process, itself made in another folder), moved to a laptop folder, then to CI's checkout
    built, first = improved_gated
    assert first.ret == 0, first.stdout.str()
    project = pytester.path / "laptop" / "noisy_agent"
    project.parent.mkdir()
    shutil.move(built, project)
    run_id = projects.run_dir(project).name

    moved = pytester.path / "ci" / "checkout" / "noisy_agent"
    moved.parent.mkdir(parents=True)
    shutil.move(project, moved)
    assert not project.exists()
    rundir = projects.run_dir(moved)
    assert rundir.name == run_id
    assert json.loads((rundir / "state.json").read_text())["best_id"] == "improved"

    resumed = capevolve(moved)  # the best, 'improved', again: all persisted
    assert resumed.ret == 0, resumed.stdout.str() + resumed.stderr.str()
    resumed.stdout.fnmatch_lines(["rollouts: 0 paid, 80 reused*"])

    # no null controls: new copies of the best would pay 160 rollouts for nothing a move changes
    gated = capevolve(moved, "mixed", gate=True, extra=["--capevolve-null", "0"])
    assert gated.ret in (0, 10), gated.stdout.str() + gated.stderr.str()
    gated.stdout.fnmatch_lines(["*capevolve verdicts vs improved (val)*", "mixed *40*"])
    gated.stdout.fnmatch_lines(["rollouts: 80 paid, 80 reused*"])  # mixed, against the best's
    assert (rundir / "verdicts" / "mixed.json").is_file()

    final = capevolve(moved, finalize=True)
    assert final.ret == 0, final.stdout.str() + final.stderr.str()
    seal = json.loads((rundir / "seal.json").read_text())
    assert seal["tasks"] == len(json.loads((rundir / "splits.json").read_text())["test"])
    assert seal["best"]["tag"] == json.loads((rundir / "state.json").read_text())["best_id"]
    assert seal["seed"]["tag"] == "seed"
    assert [p.name for p in (moved / ".capevolve" / "runs").iterdir()] == [run_id]  # one run all along

    # nothing the run keeps about the project names the folder it lives in
    stored = [rundir / "spec.lock.yaml", *(rundir / "candidates").glob("*/candidate.json")]
    assert not [p for p in stored if str(pytester.path) in p.read_text()]
