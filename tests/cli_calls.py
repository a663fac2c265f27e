"""`capevolve` called in process, as both halves of test_cli_args and of test_hill_climb call it:
the exit code with what it printed (captured by capsys; hill-climb's and gate's JSON parsed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()  # drop what an in-process session printed before
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def hill_climb(capsys: pytest.CaptureFixture[str], project: Path, *argv: str) -> tuple[int, dict | None, str]:
    capsys.readouterr()
    code = main(["hill-climb", str(project), *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def gate(capsys: pytest.CaptureFixture[str], project: Path, tag: str) -> dict:
    """The verdict ``capevolve gate TAG --json`` re-derives from the run's log."""
    _, out, _ = run(capsys, "gate", tag, "--project", str(project), "--json")
    return json.loads(out.strip().splitlines()[-1])
