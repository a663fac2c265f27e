"""Every ``capevolve`` command names its project the same way and refuses a missing one the same
way: ``--project DIR`` accepted, exit 4 (the usage code of :mod:`pytest_capevolve.exitcodes`)
and one ``error: no such project folder: …`` line — or it is listed as reading no project."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pytest_capevolve import exitcodes
from pytest_capevolve._cli.main import build_parser, main

# the arguments each command needs besides its project (nested commands: their full words)
NEEDS = {
    "check": [],
    "runs": [],
    "verify": [],
    "plan": [],
    "measure": [],
    "dashboard": [],
    "gate": ["careful"],
    "commit": ["careful", "--decision", "accept"],
    "baseline": [],
    "work": ["new", "careful"],
    "spend": [],
    "diagnose": ["careful"],
    "diff": ["careful"],
    "multirep": ["careful"],
    "merge": ["a", "b", "--tag", "ab"],
    "hill-climb": [],
    "microcase": ["gen", "--from", "rollout.json", "--cluster", "c"],
    "eval-task": ["careful", "q01"],
    "mechanism": ["add", "a cause"],
}
# Commands that take no --project: they write a project, read other tools' results, work in the
# current folder (`agent`) or pass their arguments to pytest.
NO_PROJECT = ("import-cap-evolve", "init", "skills", "compare", "agent", "pytest")


def subcommands() -> list[str]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


def test_every_command_is_listed_here_or_reads_no_project() -> None:
    assert sorted([*NEEDS, *NO_PROJECT]) == subcommands()


@pytest.mark.parametrize("command", sorted(NEEDS))
def test_a_missing_project_is_one_line_and_exit_4_for_every_command(command, tmp_path: Path, capsys) -> None:
    nowhere = tmp_path / "nowhere"
    words, rest = NEEDS[command][:1], NEEDS[command][1:]
    nested = ("work", "microcase", "mechanism")
    head = [command, *words] if command in nested else [command]
    tail = rest if command in nested else NEEDS[command]
    capsys.readouterr()
    assert main([*head, *tail, "--project", str(nowhere)]) == exitcodes.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"error: no such project folder: {nowhere}; give a folder holding capevolve.yaml\n"


def test_measure_takes_the_flag_its_finalizes_seal_refusal_names() -> None:
    """`capevolve measure --finalize` prints the finalize session's refusal, whose way on is
    `--capevolve-test-reused`; measure refused that flag ("unrecognized arguments")."""
    from pytest_capevolve._store.memory.project_seal import reused_line

    said = reused_line("r2", [("r1", ["q01"])])
    assert "--capevolve-test-reused" in said
    args = build_parser("measure").parse_args(["measure", "--finalize", "--capevolve-test-reused"])
    assert args.test_reused is True


def _takes_a_project_folder(command: str) -> bool:
    head, tail = _words(command)
    return hasattr(build_parser(command).parse_args([*head, *tail]), "project")


def _words(command: str) -> tuple[list[str], list[str]]:
    nested = ("work", "microcase", "mechanism")
    if command in nested:
        return [command, NEEDS[command][0]], NEEDS[command][1:]
    return [command], NEEDS[command]


@pytest.mark.parametrize("command", [c for c in sorted(NEEDS) if _takes_a_project_folder(c)])
def test_the_project_folder_may_come_last_after_the_options(command, tmp_path: Path, capsys) -> None:
    """`capevolve commit TAG --decision reject --reject-basis gate .` said "unrecognized arguments: .":
    argparse gives an optional positional nothing once an option follows the tag. The folder is
    taken last as it is first."""
    nowhere = tmp_path / "nowhere"
    head, tail = _words(command)
    capsys.readouterr()
    assert main([*head, *tail, str(nowhere)]) == exitcodes.USAGE
    assert (
        capsys.readouterr().err
        == f"error: no such project folder: {nowhere}; give a folder holding capevolve.yaml\n"
    )


def test_a_second_word_after_the_options_is_still_refused(capsys) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["commit", "careful", "--decision", "accept", "here", "there"])
    assert refused.value.code == 2
    assert "unrecognized arguments: here there" in capsys.readouterr().err
