"""The `capevolve` command's shared arguments: PROJECT (default .), --project as the older
spelling, --run-id, --json (JSON alone on stdout), --version, `runs`, and what it says outside
a project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_calls import run

from pytest_capevolve._store.rundir import RunDir


@pytest.fixture
def gated(example, capevolve) -> Path:
    """toy_calc after a gate session that accepted `careful`."""
    project = example("toy_calc")
    assert capevolve(project, "careful", gate=True).ret == 0
    return project


def test_json_is_alone_on_stdout_for_every_command(gated: Path, projects, capsys) -> None:
    rundir = projects.run_dir(gated)
    p, run_id = str(gated), ["--run-id", rundir.name]
    failing_rollout = str(RunDir(rundir).rollout_path("val", "q01", "seed", 0))
    commands = [
        ["check", p, *run_id],
        ["gate", "careful", p, "--against", "seed", *run_id],
        ["plan", p, *run_id],
        ["measure", p, "--no-finalize", *run_id],
        ["verify", p, *run_id],
        ["runs", p],
        ["spend", p, *run_id],
        ["diagnose", "careful", p, *run_id],
        ["microcase", "gen", p, "--from", failing_rollout, "--cluster", "arith"],
    ]
    for argv in commands:
        code, out, err = run(capsys, *argv, "--json")
        assert code == 0, (argv, err)
        json.loads(out)  # the whole of stdout is one JSON value
    code, out, err = run(capsys, "gate", "careful", p, "--against", "seed", "--json")
    assert json.loads(out)["decision"] == "accept"
    assert "careful  ACCEPT" in err  # the table, for people, on stderr


def test_project_positional_defaults_to_the_current_folder_and_old_forms_still_work(
    gated: Path, projects, capsys, monkeypatch
) -> None:
    rundir = projects.run_dir(gated)
    recorded = json.loads((rundir / "verdicts" / "careful.json").read_text())
    monkeypatch.chdir(gated)
    for argv in (
        ["gate", "careful", "--json"],  # PROJECT defaults to .
        ["gate", "careful", str(gated), "--json"],
        ["gate", "careful", "--project", str(gated), "--json"],  # the older spelling
        ["gate", "careful", "--run-id", rundir.name, "--json"],
    ):
        code, out, _err = run(capsys, *argv)
        assert code == 0 and json.loads(out)["p_value"] == recorded["p_value"], argv
    code, out, _err = run(capsys, "verify", str(rundir))  # a run dir on its own
    assert code == 0 and "rollout files and state.json agree" in out
    code, out, _err = run(capsys, "verify", "--run-id", rundir.name)
    assert code == 0 and "rollout files and state.json agree" in out
    for argv in (
        ["diff", "careful", str(gated)],
        ["diff", "careful", "seed", str(gated)],
        ["diff", "careful"],
    ):
        code, out, _err = run(capsys, *argv)  # B and PROJECT told apart: only PROJECT holds a spec
        assert code == 0 and out.startswith("--- seed/") and "+++ careful/" in out, argv
    code, _out, err = run(capsys, "gate", "careful", "--run-id", "nope")
    assert code == 4 and "no run 'nope'" in err
    code, _out, err = run(capsys, "spend", str(gated), "--project", str(gated.parent))
    assert code == 4 and "two projects given" in err
    code, _out, err = run(capsys, "spend", "--json", "--table")
    assert code == 2 and "give one" in err


def test_runs_lists_best_iterations_spend_and_the_seal(gated: Path, capevolve, projects, capsys) -> None:
    first = projects.run_dir(gated).name
    assert capevolve(gated, "careful", extra=["--capevolve-new-run"]).ret == 0
    ids = sorted(p.name for p in (gated / ".capevolve" / "runs").iterdir() if p.is_dir())
    (second,) = set(ids) - {first}
    # finalizes the first run
    assert run(capsys, "measure", str(gated), "--run-id", first, "--finalize")[0] == 0
    code, out, _err = run(capsys, "runs", str(gated), "--json")
    assert code == 0
    rows = {row["run_id"]: row for row in json.loads(out)}
    assert list(rows) == ids  # oldest first; the last is the one sessions use
    assert [rows[i]["current"] for i in ids] == [False, True]
    assert (rows[first]["best"], rows[first]["iterations"], rows[first]["test"]) == ("careful", 1, "scored")
    assert rows[first]["rollouts"] == 12 * 4 + 6 * 2  # seed, careful, 2 nulls on val; test: seed, best
    # its test tasks are the first run's, scored: its finalize is refused (the project's test seal)
    assert (rows[second]["best"], rows[second]["iterations"], rows[second]["test"]) == (
        "seed",
        0,
        "scored elsewhere",
    )
    assert rows[second]["test_scored_by"] == [first] and rows[first]["test_scored_by"] == []
    assert rows[second]["rollouts"] == 24
    code, out, _err = run(capsys, "runs", str(gated))
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert out.splitlines()[0].split() == ["run", "best", "iterations", "rollouts", "$", "spent", "test"]
    assert lines[first][:3] == [first, "careful", "1"] and "scored" in lines[first]
    assert "elsewhere" in lines[second] and lines[ids[-1]][-1] == "current"
    assert f"{second}: its test tasks were scored by run {first}, so its finalize is refused" in out
    assert run(capsys, "runs", str(gated), "--table") == (0, out, _err)  # as the other commands take it
    code, _out, err = run(capsys, "runs", str(gated), "--table", "--json")
    assert code == 2 and "give one" in err
