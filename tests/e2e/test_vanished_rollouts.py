"""A rollout file deleted by hand: the session that finds it gone says so, logs it
(``rollout_vanished``) and pays it again, and ``capevolve verify`` stays clean after that
re-pay; a deletion no session has seen yet is still reported by ``verify``."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main  # numpy and scipy load once, here, not in each in-process session


def _events(rundir: Path, kind: str) -> list[dict]:
    lines = (rundir / "events.jsonl").read_text().splitlines()
    return [event for event in map(json.loads, lines) if event["kind"] == kind]


def _notices(output: str, word: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("capevolve:") and word in line]


@pytest.mark.attack(
    "held-before",
    attack="a truncated rollout file; a deleted one",
)
def test_a_deleted_rollout_is_said_logged_and_paid_again_and_verify_stays_clean(
    toy_calc_baseline, projects, capevolve, capsys
) -> None:
    project = toy_calc_baseline
    rundir = projects.run_dir(project)
    victim = sorted((rundir / "rollouts" / "val").glob("*.json"))[3]
    victim.unlink()
    rel = victim.relative_to(rundir).as_posix()
    capsys.readouterr()
    # no session has seen it yet: verify reports it missing, and logs nothing
    assert main(["verify", str(rundir)]) == 1
    assert f"{rel}: recorded by rollout event" in capsys.readouterr().out
    assert not _events(rundir, "rollout_vanished")
    result = capevolve(project)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["rollouts: 1 paid, 11 reused*"])
    said = _notices(out, "gone")
    assert len(said) == 1 and rel in said[0] and "paid again" in said[0], out
    assert [event["files"] for event in _events(rundir, "rollout_vanished")] == [[rel]]
    assert victim.is_file()  # paid again
    capsys.readouterr()
    assert main(["verify", str(rundir)]) == 0, capsys.readouterr().out
    assert main(["verify", "--repair", str(rundir)]) == 0
    # a session with nothing vanished says nothing and logs nothing more
    result = capevolve(project)
    assert result.ret == 0 and not _notices(result.stdout.str(), "gone")
    assert len(_events(rundir, "rollout_vanished")) == 1


def test_a_deleted_folder_of_rollouts_gets_one_notice_line_and_one_event(
    example, projects, capevolve
) -> None:
    project = example("toy_calc")
    assert capevolve(project, "careful").ret == 0
    rundir = projects.run_dir(project)
    gone = sorted((rundir / "rollouts" / "val").glob("*.json"))
    assert len(gone) == 24
    for path in gone:
        path.unlink()
    result = capevolve(project, "careful")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["rollouts: 24 paid, 0 reused*"])
    said = _notices(result.stdout.str(), "gone")
    assert len(said) == 1 and "24 " in said[0] and "paid again" in said[0], said
    assert len(said[0]) < 400
    (event,) = _events(rundir, "rollout_vanished")
    assert sorted(event["files"]) == [p.relative_to(rundir).as_posix() for p in gone]
    assert main(["verify", str(rundir)]) == 0


def test_verify_repair_logs_a_deletion_no_session_saw_so_its_re_pay_is_expected(
    toy_calc_baseline, projects, capevolve, capsys
) -> None:
    project = toy_calc_baseline
    rundir = projects.run_dir(project)
    victim = sorted((rundir / "rollouts" / "val").glob("*.json"))[0]
    victim.unlink()
    rel = victim.relative_to(rundir).as_posix()
    capsys.readouterr()
    assert main(["verify", "--repair", str(rundir)]) == 0
    assert rel in capsys.readouterr().out
    assert [event["files"] for event in _events(rundir, "rollout_vanished")] == [[rel]]
    result = capevolve(project)
    result.stdout.fnmatch_lines(["rollouts: 1 paid, 11 reused*"])
    assert not _notices(result.stdout.str(), "gone")  # already logged: not said twice
    assert main(["verify", str(rundir)]) == 0


# -- the hint that says how to complete a session's missing rollouts -----------------------------

FLAKY = """

class FlakyCalc(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        if task.id == "q01" and (Path(__file__).parent / "DOWN").exists():
            raise ConnectionError("backend down")
        return super().run_target(task, ctx, seed=seed)
"""


def _completing(result) -> list[str]:
    """The args of the command the session printed to complete its missing rollouts."""
    lines = result.stdout.lines
    (at,) = [i for i, line in enumerate(lines) if re.search(r"\d+ rollouts? (is|are) missing", line)]
    assert lines[at].endswith("to complete only those, run:"), lines[at]
    command = shlex.split(lines[at + 1].strip())
    assert command[0] == "pytest"
    return command[1:]


def test_the_missing_rollouts_hint_of_a_new_run_pins_the_run(example, projects, capevolve, pytester) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, FLAKY, "adapter.py:FlakyCalc")
    (project / "DOWN").touch()
    result = capevolve(project, extra=["--capevolve-new-run"])
    assert result.ret != 0
    result.stdout.fnmatch_lines(["rollouts: 12 paid, 0 reused*", "*INFRA val::q01*backend down"])
    run_id = projects.run_dir(project).name
    args = _completing(result)
    assert "--capevolve-new-run" not in args and args[-2:] == ["--capevolve-run-id", run_id]
    (project / "DOWN").unlink()
    again = pytester.runpytest(*args)
    assert again.ret == 0, again.stdout.str()
    again.stdout.fnmatch_lines(["rollouts: 1 paid, 11 reused*"])
    assert len(list((project / ".capevolve" / "runs").iterdir())) == 1  # no second run


def test_the_missing_rollouts_hint_leaves_out_the_deselection(example, projects, capevolve, pytester) -> None:
    project = example("toy_calc")
    assert capevolve(project, extra=["-k", "not q01 and not q05"]).ret != 0
    first = capevolve(project, extra=["-k", "not q01 and not q05"])  # nothing left that it selects
    first.stdout.fnmatch_lines(["rollouts: 0 paid, 10 reused*", "2 rollouts are missing (2 deselected by *"])
    args = _completing(first)
    assert "-k" not in args and "not q01 and not q05" not in args
    again = pytester.runpytest(*args)
    assert again.ret == 0, again.stdout.str()
    again.stdout.fnmatch_lines(["rollouts: 2 paid, 10 reused*"])
    assert "rollouts are missing" not in again.stdout.str()


def test_a_deletion_is_logged_even_when_the_index_that_knew_the_file_is_rebuilt(
    toy_calc_baseline, projects, capevolve, capsys
) -> None:
    project = toy_calc_baseline
    rundir = projects.run_dir(project)
    victim = sorted((rundir / "rollouts" / "val").glob("*.json"))[5]
    victim.unlink()
    (rundir / "index.sqlite").unlink()  # no row is left to miss the file
    result = capevolve(project)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["rollouts: 1 paid, 11 reused*"])
    rel = victim.relative_to(rundir).as_posix()
    said = _notices(result.stdout.str(), "gone")
    assert len(said) == 1 and rel in said[0], result.stdout.str()
    assert [event["files"] for event in _events(rundir, "rollout_vanished")] == [[rel]]
    capsys.readouterr()
    assert main(["verify", str(rundir)]) == 0, capsys.readouterr().out


def test_plain_verify_writes_nothing_even_with_the_index_gone(toy_calc_baseline, projects, capsys) -> None:
    """Only ``--repair`` writes the run: a plain verify of a run whose index was deleted with a
    rollout file reports both, and leaves the log and the index as they were."""
    project = toy_calc_baseline
    rundir = projects.run_dir(project)
    victim = sorted((rundir / "rollouts" / "val").glob("*.json"))[2]
    victim.unlink()
    for leftover in rundir.glob("index.sqlite*"):
        leftover.unlink()
    log = (rundir / "events.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["verify", str(rundir)]) == 1
    out = capsys.readouterr().out
    assert victim.name in out and "index.sqlite: missing" in out
    assert (rundir / "events.jsonl").read_bytes() == log  # no vanish logged, nothing rebuilt
    assert not list(rundir.glob("index.sqlite*"))
    assert main(["verify", "--repair", str(rundir)]) == 0  # the repair logs and rebuilds
    assert len(_events(rundir, "rollout_vanished")) == 1
