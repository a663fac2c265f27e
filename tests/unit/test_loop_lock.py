"""One loop per project (:mod:`pytest_capevolve._loop.hill_climb`): a second ``capevolve
hill-climb`` on a project whose loop is running is refused in one line, before it touches the
run (the loop's red team: a second loop with ``--resume`` deleted the first's work copy, ran
its optimizer twice and booked its cost once)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from cli_calls import hill_climb

from pytest_capevolve._loop.hill_climb import only_loop

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.attack(
    "harness",
    attack="a second `capevolve hill-climb` (or `--resume`) on a project whose loop is running",
    outcome="refused in one line naming the first loop's pid",
)
def test_a_second_loop_on_a_project_is_refused_while_the_first_runs(tmp_path: Path, capsys) -> None:
    project = tmp_path / "toy_calc"
    shutil.copytree(
        EXAMPLES / "toy_calc", project, ignore=shutil.ignore_patterns(".capevolve", "__pycache__")
    )
    optimizer = f"{sys.executable} -c pass {{workdir}}"
    with only_loop(project):  # the first loop, still running
        code, summary, err = hill_climb(capsys, project, "--optimizer", optimizer, "--max-iterations", "1")
        assert code == 2 and summary is None, err
        assert "another loop is running on" in err and "pid" in err
        assert not (project / ".capevolve" / "runs").exists()  # refused before any run was made
    # once the first has ended (its lock dropped), a loop starts
    code, summary, err = hill_climb(capsys, project, "--optimizer", optimizer, "--max-iterations", "1")
    assert code == 0 and summary is not None, err
