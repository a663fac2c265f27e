"""`capevolve measure` (the honest table, report.md) and `capevolve verify` (the event chain)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pytest_capevolve._cli.main import main
from pytest_capevolve._store.decisions.verdicts import Verdicts


@pytest.fixture
def evaluate(capevolve):
    """``evaluate(project, *candidates, gate=False)``: a session that must complete (exit 0 or 10)."""

    def run(project: Path, *candidates: str, gate: bool = False) -> pytest.RunResult:
        result = capevolve(project, *candidates, gate=gate)
        assert result.ret in (0, 10), result.stdout.str()
        return result

    return run


def test_measure_runs_finalize_once_and_reports_where_each_number_came_from(
    improved_gated, projects, capsys, monkeypatch
):
    project, gated = (
        improved_gated  # noisy_agent at two trials, improved gated: a copy of one build per process
    )
    assert gated.ret in (0, 10), gated.stdout.str()
    capsys.readouterr()
    rundir = projects.run_dir(project)
    verdict = json.loads((rundir / "verdicts" / "improved.json").read_text())
    assert verdict["decision"] == "accept"

    # a look at the table never spends the test score: without --finalize the split stays sealed
    passes: list[int] = []
    real = Verdicts.checked_all
    monkeypatch.setattr(Verdicts, "checked_all", lambda self: passes.append(1) or real(self))
    assert main(["measure", str(project)]) == 0
    assert len(passes) == 1  # one pass over the verdict files, shared by the spend and the confinement
    monkeypatch.undo()
    captured = capsys.readouterr()
    assert "test split sealed" in captured.out + captured.err and "--finalize" in captured.out + captured.err
    assert not (rundir / "seal.json").exists()

    assert main(["measure", str(project), "--finalize"]) == 0
    out = capsys.readouterr().out
    seal = json.loads((rundir / "seal.json").read_text())
    assert f"best − seed on val: {verdict['delta_mean']:+.4f}" in out  # same number as the gate's
    assert f"best − seed on test: {seal['delta_vs_seed']['mean']:+.4f}" in out
    assert "NOTE selected on val" in out
    assert any(line.startswith("train") and "not evaluated" in line for line in out.splitlines())
    report = (rundir / "report.md").read_text()
    assert "`seed` → `improved`: one-sided paired sign-flip test" in report
    assert "verdicts/improved.json" in report and "seal.json" in report
    assert "rollouts paid: test 96, val 320" in report

    # measuring again reads the seal: it never scores the test split a second time
    assert main(["measure", str(project), "--finalize"]) == 0
    assert "running finalize" not in capsys.readouterr().out
    lines = (rundir / "events.jsonl").read_text().splitlines()
    assert sum(json.loads(x)["kind"] == "test_scored" for x in lines) == 1


def test_measure_calls_a_test_split_that_overlaps_val_a_fit_metric(example, projects, evaluate, capsys):
    project = example("toy_calc")
    ids = [f"q{i:02d}" for i in range(24)]
    (project / "splits.yaml").write_text(
        yaml.safe_dump({"train": ids[:6], "val": ids[6:18], "test": ids[15:21]})
    )
    spec = project / "capevolve.yaml"
    text = "\n".join(line for line in spec.read_text().splitlines() if not line.startswith("split_"))
    spec.write_text(text + "\nsplit_ids_file: splits.yaml\n")
    evaluate(project)
    capsys.readouterr()
    assert main(["measure", str(project), "--finalize"]) == 0
    out = capsys.readouterr().out
    assert "NOTE fit metric: the test split shares 3 of its 6 tasks with val/train" in out
    assert "NOTE null result" in out
    assert "fit metric" in (projects.run_dir(project) / "report.md").read_text()


def test_measure_says_empty_and_sealed_instead_of_zero(example, projects, evaluate, capsys):
    project = example("toy_calc")
    projects.no_test_split(project)
    evaluate(project)
    capsys.readouterr()
    assert main(["measure", str(project), "--finalize"]) == 0
    test_rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("test")]
    assert len(test_rows) == 1 and test_rows[0].endswith("empty: no held-out tasks")
    assert "0." not in test_rows[0]
    assert not (projects.run_dir(project) / "seal.json").exists()

    other = example("toy_calc", dest="other")
    evaluate(other)
    capsys.readouterr()
    assert main(["measure", str(other), "--no-finalize"]) == 0
    out = capsys.readouterr().out
    assert "sealed: not finalized yet" in out and "running finalize" not in out
    assert not (projects.run_dir(other) / "seal.json").exists()


def test_a_session_leaves_a_report_in_the_run_dir(example, projects, evaluate):
    project = example("toy_calc")
    evaluate(project)
    report = (projects.run_dir(project) / "report.md").read_text()
    assert "| val | seed | seed |" in report and "sealed: not finalized yet" in report


@pytest.fixture
def events_file(example, projects, evaluate):
    project = example("toy_calc")
    evaluate(project)
    path = projects.run_dir(project) / "events.jsonl"
    assert main(["verify", str(path.parent)]) == 0
    return path


@pytest.mark.attack(
    "record",
    attack="a line of the log edited in the middle",
)
def test_verify_finds_one_line_edited_in_the_middle(events_file, capsys):
    lines = events_file.read_text().splitlines()
    middle = len(lines) // 2
    event = json.loads(lines[middle - 1])
    assert event["kind"] == "rollout"
    event["reward"] = 1.0 - event["reward"]  # flip one recorded outcome
    lines[middle - 1] = json.dumps(event, sort_keys=True)
    events_file.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["verify", str(events_file.parent)]) == 1
    assert f"line {middle} was edited" in capsys.readouterr().out


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda lines: lines[:5] + lines[6:], "line 6: line(s) with seq 6..6 are missing"),
        (lambda lines: lines[:5] + [lines[6], lines[5]] + lines[7:], "line 6: seq 7 after 5"),
        (lambda lines: ["{not json"] + lines[1:], "line 1 is not an event"),
    ],
    ids=["removed", "reordered", "garbled"],
)
def test_verify_finds_missing_reordered_and_garbled_lines(events_file, capsys, damage, message):
    lines = events_file.read_text().splitlines()
    events_file.write_text("\n".join(damage(lines)) + "\n")
    capsys.readouterr()
    assert main(["verify", str(events_file.parent)]) == 1
    assert message in capsys.readouterr().out
