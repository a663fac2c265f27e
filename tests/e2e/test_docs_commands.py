"""Every command of the tutorials, and of the README's quickstart, runs as written and prints
what the page says (tests/docs_commands.py), offline, in a fresh folder. docs/tutorial/your-project.md
is played by tests/e2e/test_newcomer_path.py, as the first part of the newcomer's path (one
walkthrough a page)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from docs_commands import commands, pattern, play, unmatched

# the pages' gains are checked against typical draws, in every session they start (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("typical_seed_draws")

REPO = Path(__file__).resolve().parents[2]
TUTORIALS = ["docs/tutorial/hill-climb.md"]


@pytest.mark.parametrize("page", TUTORIALS)
def test_every_tutorial_command_runs_as_the_page_says(page: str, tmp_path: Path) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    assert len(commands(text)) >= 5
    ran = play(text, tmp_path)
    assert ran and all(result.returncode == command.exit_code for command, result in ran)


@pytest.mark.autoload  # pasted by a user, whose sessions load every installed plugin
def test_the_readme_quickstart_ends_in_a_verdict_line(tmp_path: Path) -> None:
    """Pasted from the repository root after the set-up (which made .venv), the quickstart
    gates the bundled candidate and prints its ACCEPT line with its p and why."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    shutil.copytree(
        REPO / "examples" / "noisy_agent",
        tmp_path / "examples" / "noisy_agent",
        ignore=shutil.ignore_patterns(".capevolve", "__pycache__"),
    )
    os.symlink(Path(sys.executable).parent.parent, tmp_path / ".venv")
    ran = play(text, tmp_path)
    assert any("ACCEPT" in result.stdout and "p = " in result.stdout for _, result in ran)


def test_the_runner_catches_output_a_page_claims_but_the_command_does_not_print() -> None:
    assert unmatched(["a …", "c"], ["a b", "x", "c"]) == []
    assert unmatched(["c", "a …"], ["a b", "c"]) == ["a …"]  # order matters
    assert pattern("[x] 1*2?") == "[[]x[]] 1[*]2[?]"
    page = "```console\n$ echo hi  # exit 3\nhi\n```\n"
    (only,) = commands(page)
    assert (only.line, only.exit_code, only.expected) == ("echo hi", 3, ["hi"])
    with pytest.raises(AssertionError, match="not printed"):
        play("```console\n$ echo hello\ngoodbye\n```\n", Path("."))
    with pytest.raises(AssertionError):
        play("```console\n$ false\n```\n", Path("."))


def test_a_page_played_in_one_shell_gives_each_command_its_own_output_and_exit(tmp_path: Path) -> None:
    """``inside=``: the page's commands in one shell (the playbooks' one agent), split again."""
    page = (
        "```console\n$ printf out; printf err >&2\nout\nerr\n$ cd sub\n"
        "$ pwd; echo gone >&2; exit 3  # exit 3\n…/sub\ngone\n$ echo last\nlast\n```\n"
    )
    (tmp_path / "sub").mkdir()
    ran = play(page, tmp_path, inside=("env",))
    assert [result.returncode for _, result in ran] == [0, 3, 0]
    assert [result.stdout.split() for _, result in ran] == [["out"], [str(tmp_path / "sub")], ["last"]]
    assert [result.stderr.split() for _, result in ran] == [["err"], ["gone"], []]
    with pytest.raises(AssertionError, match="not printed"):
        play("```console\n$ echo hello\ngoodbye\n```\n", tmp_path, inside=("env",))
    with pytest.raises(AssertionError):
        play("```console\n$ true\n$ exit 1\n```\n", tmp_path, inside=("env",))
