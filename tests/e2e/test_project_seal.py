"""One seal per project's test tasks (issue 25, item 3): a new run drawing the test tasks an
earlier run scored does not score them again unsaid — refused, naming the run and the tasks,
whichever of the two records an adversary deletes; acknowledged, every view says so."""

from __future__ import annotations

import json
import shutil

import pytest
from cli_calls import run
from fix_list_project import make_fix_list

from pytest_capevolve._store.memory.project_seal import REUSED_LABEL


@pytest.fixture
def finalized(built, example, projects, capevolve):
    """The fix-list project after its first session and its finalize (the test split scored once
    and sealed): built once per process (tests/conftest.py's ``built``), a copy for each test."""

    def make():
        project = make_fix_list(example, projects)
        assert capevolve(project).ret == 0
        assert capevolve(project, finalize=True).ret == 0
        return project, None

    return built("fix-list-finalized", "fixes", make)[0]


@pytest.mark.attack(
    "laundering",
    attack=(
        "a new run to score the project's sealed test tasks again; `test_seals.jsonl` or the old run "
        "folder deleted"
    ),
    outcome=(
        'refused, naming the run and tasks; an explicit acknowledgement marks every table "test reused"'
    ),
)
def test_a_new_run_does_not_score_the_projects_scored_test_tasks_unsaid(
    finalized, projects, capevolve, capsys, tmp_path
):
    project = finalized
    first = projects.run_dir(project)
    test_ids = json.loads((first / "splits.json").read_text())["test"]
    assert capevolve(project, extra=["--capevolve-new-run"]).ret == 0
    second = projects.run_dir(project)
    assert second != first and json.loads((second / "splits.json").read_text())["test"] == test_ids

    def refused() -> None:
        again = capevolve(project, finalize=True)
        assert again.ret == 4, again.stdout.str()
        again.stderr.fnmatch_lines(
            [
                f"ERROR: TestSealError: run {second.name}: its test split overlaps test tasks the project "
                f"already scored (run {first.name}: 6 task(s) {', '.join(test_ids)})*--capevolve-test-reused*"
            ]
        )
        assert not list((second / "rollouts" / "test").glob("*.json"))  # nothing paid

    refused()  # today: scored a second time, and called held out
    # the adversary deletes one record; the other still holds
    aside = tmp_path / "aside"
    shutil.move(first, aside)
    refused()  # the run is gone: the project's file remembers it
    shutil.move(aside, first)
    (project / ".capevolve" / "test_seals.jsonl").unlink()
    refused()  # the file is gone: the earlier run's log says it scored them
    code, _, err = run(capsys, "measure", str(project), "--finalize")
    assert code != 0 and "the test row stays sealed" in err
    # a look at the table names the finalize that is not refused (it said plain `--finalize`)
    code, out, _ = run(capsys, "measure", str(project))
    said = f"`capevolve measure {project.name} --finalize --capevolve-test-reused` scores it labelled"
    assert code == 0 and f"its test tasks were scored by run {first.name}" in out and said in out, out

    xml = tmp_path / "finalize.xml"
    scored = capevolve(project, finalize=True, extra=["--capevolve-test-reused", f"--junitxml={xml}"])
    assert scored.ret == 0, scored.stdout.str()
    scored.stdout.fnmatch_lines([f"*{REUSED_LABEL}: these test tasks were scored before (run {first.name})*"])
    junit = xml.read_text()
    assert f'name="capevolve_test_reused" value="{REUSED_LABEL}"' in junit
    assert junit.count(f'name="test_reused" value="{REUSED_LABEL}"') == len(test_ids)
    code, out, _ = run(capsys, "measure", str(project), "--finalize")
    assert code == 0 and f"NOTE {REUSED_LABEL}" in out
    assert REUSED_LABEL in (second / "report.md").read_text()
    assert run(capsys, "dashboard", str(project))[0] == 0
    assert REUSED_LABEL in (second / "dashboard.html").read_text()
    code, out, _ = run(capsys, "runs", str(project), "--json")
    assert [row["test"] for row in json.loads(out)] == ["scored", "scored (reused)"]


def test_the_way_on_from_a_sealed_test_is_a_split_ids_file(finalized, capevolve):
    """An honest user after a finalize: another split_seed (the way on these refusals used to name)
    deals the scored tasks into val or train again and is refused; the split_ids_file the refusal
    names now, leaving them out, is measured and finalized."""
    project = finalized
    spec = project / "capevolve.yaml"
    spec.write_text(spec.read_text().replace("split_seed: 1", "split_seed: 2"))
    reshuffled = capevolve(project, extra=["--capevolve-new-run"])
    assert reshuffled.ret == 4
    reshuffled.stderr.fnmatch_lines(["*Ways on: a new run whose split_ids_file leaves these tasks out*"])
    first = sorted((project / ".capevolve" / "runs").iterdir())[0]
    scored = json.loads((first / "splits.json").read_text())
    (project / "splits.json").write_text(
        json.dumps({"train": [], "val": scored["val"], "test": scored["train"]})
    )
    kept = [line for line in spec.read_text().splitlines() if not line.startswith("split_")]
    spec.write_text("\n".join([*kept, "split_ids_file: splits.json", ""]))
    assert capevolve(project, extra=["--capevolve-new-run"]).ret == 0
    final = capevolve(project, finalize=True)
    assert final.ret == 0, final.stderr.str()
    final.stdout.fnmatch_lines(["test split scored once and sealed*"])


@pytest.mark.attack(
    "laundering",
    attack=(
        "`rm .capevolve/test_seals.jsonl` and the old run's `events.jsonl` renamed, then a new run's finalize"
    ),
    outcome="refused: a run folder with no readable log is a run whose test status is unknown",
)
def test_a_run_whose_log_was_renamed_still_holds_the_seal(finalized, projects, capevolve):
    project = finalized
    first = projects.run_dir(project)
    test_ids = json.loads((first / "splits.json").read_text())["test"]
    # the red team's steps: the project's file deleted, the old run's log renamed
    (project / ".capevolve" / "test_seals.jsonl").unlink()
    (first / "events.jsonl").rename(first / "events.jsonl.old")
    assert capevolve(project, extra=["--capevolve-new-run"]).ret == 0
    second = projects.run_dir(project)
    assert second != first

    again = capevolve(project, finalize=True)
    # today: scored a second time, and called held out
    assert again.ret == 4, again.stdout.str()
    again.stderr.fnmatch_lines(
        [
            f"ERROR: TestSealError: run {second.name}: its test split overlaps test tasks the project "
            f"already scored (run {first.name} (test status unknown: its folder holds a run's files but "
            f"no events.jsonl): 6 task(s) {', '.join(test_ids)})*--capevolve-test-reused*"
        ]
    )
    assert not list((second / "rollouts" / "test").glob("*.json"))  # nothing paid

    scored = capevolve(project, finalize=True, extra=["--capevolve-test-reused"])
    assert scored.ret == 0, scored.stdout.str()
    scored.stdout.fnmatch_lines(
        [f"*{REUSED_LABEL}: these test tasks were scored before (run {first.name} (test status unknown*"]
    )
