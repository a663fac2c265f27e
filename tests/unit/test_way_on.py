"""A way on reprints the command the user typed (``_project/way_on.py``)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import pytest_capevolve
from pytest_capevolve._project.way_on import VALUELESS, commit_command, own_flags, pasteable, shown


def test_a_word_after_a_valueless_flag_stays_the_users() -> None:
    typed = ["--capevolve-run", "p", "--capevolve-gate", "tests/test_x.py", "-n", "2", "--capevolve-null=1"]

    flags, ours = own_flags(typed)

    # before: 'tests/test_x.py' was taken as --capevolve-gate's value, and reprinted after it
    assert flags == ["tests/test_x.py", "-n", "2"]
    assert ours == ["--capevolve-run", "p", "--capevolve-gate", "--capevolve-null=1"]
    new_run = pasteable("run pytest --capevolve-run p --capevolve-new-run", args=typed)
    assert new_run == (
        "run pytest tests/test_x.py -n 2 --capevolve-run p --capevolve-gate --capevolve-null=1 --capevolve-new-run"
    )


def test_valueless_names_every_flag_pytest_parses_as_taking_no_value(pytestconfig: pytest.Config) -> None:
    options = vars(pytestconfig.option)
    flags = {
        f"--{k.replace('_', '-')}" for k, v in options.items() if k.startswith("capevolve_") and v is False
    }
    assert flags == VALUELESS


def test_a_printed_commit_names_its_run_and_project_each_word_quoted(tmp_path: Path) -> None:
    project = tmp_path / "my agent"  # a space: pasted unquoted, it would be two words

    said = commit_command("it's", "reject", project, "20260101-000000-abcdef", "--reject-basis", "gate")

    assert shlex.split(said) == [
        # the project as every way on names it (relative where that is shorter: the cwd decides)
        *("capevolve", "commit", "it's", shown(project), "--run-id", "20260101-000000-abcdef"),
        *("--decision", "reject", "--reject-basis", "gate"),
    ]
    # a choice left to the user is printed as written; no project: the word pasteable fills in
    assert (
        commit_command("t1", "accept|reject", None, "r1")
        == "capevolve commit t1 PROJECT --run-id r1 --decision accept|reject"
    )


def test_no_module_spells_a_commit_command_but_the_one_function() -> None:
    """Every ``capevolve commit …`` a way on prints is built by ``commit_command``: an f-string that
    spells one itself is where the run was left out (issue 38: pasted after a newer run began, it
    booked into the newest run)."""
    package = Path(pytest_capevolve.__file__).parent
    spelled = [
        f"{path.relative_to(package)}:{n}"
        for path in sorted(package.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"""(?<!``)capevolve commit (\{|PROJECT|TAG |[\w-]+ --decision)""", line)
        and path.name != "way_on.py"
        and not line.lstrip().startswith(("#", '"""', "``"))
    ]
    assert spelled == []
