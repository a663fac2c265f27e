"""The `capevolve` command's shared arguments: PROJECT (default .), --project as the older
spelling, --run-id, --json (JSON alone on stdout), --version, `runs`, and what it says outside
a project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_calls import run

from pytest_capevolve import __version__
from pytest_capevolve._cli.main import main


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"capevolve (pytest-capevolve) {__version__}"


COMMANDS_OUTSIDE = [
    ["check"],
    ["gate", "t"],
    ["plan"],
    ["measure"],
    ["verify"],
    ["runs"],
    ["spend"],
    ["diagnose", "t"],
    ["work", "new", "t"],
    ["commit", "t", "--decision", "accept"],
    ["baseline"],
    ["hill-climb", "--optimizer", "true"],
    ["diff", "t"],
    ["multirep", "t"],  # commands registered by their own modules say the same
    ["merge", "a", "b", "--tag", "ab"],
    ["dashboard"],
]


@pytest.mark.parametrize("argv", COMMANDS_OUTSIDE, ids=lambda a: a[0] if a[0] != "work" else "work-new")
def test_outside_a_project_commands_say_there_is_no_spec(tmp_path, capsys, argv: list[str]) -> None:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, err = run(capsys, *argv)
    finally:
        os.chdir(cwd)
    assert code != 0
    text = out + err
    assert f"no capevolve.yaml in {tmp_path}" in text
    assert "--capevolve-run" not in text and "Traceback" not in text


def test_a_project_folder_that_does_not_exist_is_named(tmp_path, capsys) -> None:
    code, _out, err = run(capsys, "plan", str(tmp_path / "nowhere"))
    assert code == 4 and f"no such project folder: {tmp_path / 'nowhere'}" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["agent"], "give the agent's command after --"),
        (["agent", "--writable", ".", "--"], "no command after --"),
    ],
)
def test_an_agent_without_its_command_is_one_usage_line(capsys, argv, said) -> None:
    """No traceback: the command line is refused before any project is read (exit 4)."""
    assert main(argv) == 4
    err = capsys.readouterr().err
    assert err.startswith(f"error: {said}: capevolve agent") and "Traceback" not in err


def test_before_any_run_every_command_says_how_to_evaluate_in_one_error_line(
    example, capsys, monkeypatch
) -> None:
    project = example("toy_calc")
    monkeypatch.chdir(project)
    assert not (project / ".capevolve" / "runs").exists()
    needs_a_run = [a for a in COMMANDS_OUTSIDE if a[0] not in ("check", "baseline", "hill-climb", "runs")]
    for argv in needs_a_run:
        code, out, err = run(capsys, *argv)
        assert code in (2, 4) and out == "", argv
        # usage errors and loop refusals alike: one line, starting "error:", naming the command
        assert err.startswith("error: ") and err.count("\n") == 1, (argv, err)
        # the project as every way on names it: from inside it, "." (it named the absolute path)
        assert err.rstrip().endswith("evaluate first: pytest --capevolve-run ."), (argv, err)


def test_baselines_left_out_line_names_a_command_a_user_can_paste(tmp_path, monkeypatch) -> None:
    """`capevolve baseline` said "`pytest --capevolve-run …` shows it": pasted, that session reused
    every rollout and listed none ("no tests ran"). The line names `capevolve diagnose` on the best,
    which reads the failed rollouts back, quoted for a shell."""
    import shlex

    from pytest_capevolve._cli.decisions import _session_summary
    from pytest_capevolve._cli.main import build_parser

    project = tmp_path / "my agent"
    monkeypatch.chdir(tmp_path)  # named relative to the current folder, the shorter: not machine-dependent
    said = _session_summary("FAILED x\n===== capevolve run 1 =====\ntable\n", "seed", project)
    shown = shlex.split(said.split("`")[1])
    assert said.startswith("===== capevolve run 1")
    assert shown == ["capevolve", "diagnose", "seed", "my agent", "--table"]
    parsed = build_parser().parse_args(shown[1:])
    assert (parsed.command, parsed.tag, parsed.table) == ("diagnose", "seed", True)
    assert Path(parsed.project).absolute() == project


class _ClosedPipe:
    """A stdout whose reader went away (`capevolve … | head`), on a real file descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self.fd


def test_a_reader_that_stops_early_is_no_error(tmp_path, monkeypatch, capsys) -> None:
    """`capevolve measure --json | head` printed "error: … could not write Broken pipe" and
    exited 12, the code of rollouts lost to infra errors. A closed pipe is now silent, 141."""
    from pytest_capevolve import exitcodes

    with (tmp_path / "out").open("w") as out:
        monkeypatch.setattr("sys.stdout", _ClosedPipe(out.fileno()))
        code = main(["init", str(tmp_path / "p")])
    assert code == exitcodes.PIPE_CLOSED == 141
    assert "error" not in capsys.readouterr().err
    assert (tmp_path / "p" / "capevolve.yaml").is_file()  # what the command did stands


def test_the_top_level_help_names_what_the_command_does_in_a_users_words() -> None:
    """`capevolve --help` said "run-dir work that pays no rollouts" (baseline and hill-climb pay
    them) and "Exit codes: :mod:`..exitcodes`", a reference no user can follow."""
    from pytest_capevolve._cli.main import build_parser

    said = build_parser().format_help()
    assert ":mod:" not in said and "``" not in said and "pays no rollouts" not in said
    described = build_parser().description or ""
    assert "docs/reference/exit-codes.md" in described and "baseline" in described


def test_table_form_dots_a_nested_answer_rather_than_printing_a_dict() -> None:
    from pytest_capevolve._cli.decisions import key_lines

    answer = {"best": {"tag": "seed", "mean": 0.123456, "empty": {}}, "n": 3}
    assert key_lines(answer) == ["best.empty: {}", "best.mean: 0.1235", "best.tag: seed", "n: 3"]


def test_a_loops_table_says_an_adopted_accept_is_adopted() -> None:
    """`capevolve hill-climb --new-run --table` printed `cand_0001  accept` and nothing else for bytes an
    earlier run accepted (no Δ̄, no p: nothing was gated), where its log line said "adopted"."""
    from pytest_capevolve._cli.loop import summary_lines

    row = {"tag": "cand_0001", "decision": "accept", "basis": None, "delta_mean": None, "p_value": None}
    summary = {"run_id": "r", "best": "cand_0001", "accepted": ["cand_0001"], "stopped": "max iterations"}
    label = "adopted: accepted against the same bytes as 'seed' in run r0, not gated again"
    (line,) = [
        x for x in summary_lines({**summary, "iterations": [{**row, "label": label}]}) if "cand_0001  " in x
    ]
    assert line.split() == ["cand_0001", "accept", "adopted"]
