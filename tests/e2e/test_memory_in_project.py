"""Memory lives in the project (issue 37, item 7): what one copy of a project decided is kept in
its own ``.capevolve/``, so a copy of it in another folder — made as the tests copy the examples,
after the README's first command gated the example in place — and a second clone are new
projects, and gate afresh. Before, a machine-wide memory (and a marker file beside the spec,
which the copy carried along) made both refuse ``improved`` as a repeat of the first's accept:
exit 15, nothing paid, and 31 of the suite's tests failed after the README's first command.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

GATE = ["--capevolve-candidate", "candidates/improved", "--capevolve-gate"]


def _accepted(capevolve, project: Path, projects) -> None:
    # no null controls: whether a copy decides afresh is asked of improved's verdict alone
    gated = capevolve(project, "improved", gate=True, extra=["--capevolve-null", "0"])
    assert gated.ret == 0, gated.stdout.str()
    gated.stdout.fnmatch_lines(["improved *ACCEPT*40*"])
    rundir = projects.run_dir(project)
    assert json.loads((rundir / "verdicts" / "improved.json").read_text())["decision"] == "accept"
    assert json.loads((rundir / "state.json").read_text())["best_id"] == "improved"


def _files(project: Path) -> set[str]:
    """Every file of the project outside ``.capevolve`` and the bytecode caches."""
    skip = {".capevolve", "__pycache__"}
    return {
        str(p.relative_to(project))
        for p in project.rglob("*")
        if not skip & set(p.relative_to(project).parts)
    }


@pytest.mark.attack(
    "laundering",
    attack=(
        "the project copied to another folder without `.capevolve` (or cloned again), then refuted "
        "bytes gated and the sealed test tasks scored there"
    ),
)
def test_a_copy_of_the_gated_example_and_a_second_clone_each_gate_improved_afresh(
    example, projects, capevolve, pytester
):
    # the README's first command, on a copy of the example: improved gated and accepted in place
    first = example("noisy_agent", "first")
    projects.edit_spec(first, "num_trials: 5", "num_trials: 2")  # each copy decides afresh at any n
    before = _files(first)
    _accepted(capevolve, first, projects)
    # all it leaves behind is in .capevolve (before, capevolve.memory.json beside the spec too)
    assert _files(first) == before

    # a copy of it as the tests copy the examples (without .capevolve and caches)
    copied = pytester.path / "copied"
    shutil.copytree(first, copied, ignore=shutil.ignore_patterns(".capevolve", "__pycache__"))
    _accepted(capevolve, copied, projects)
    # a second clone: the example's files again, in another folder, on the same machine
    clone = example("noisy_agent", "clone")
    projects.edit_spec(clone, "num_trials: 5", "num_trials: 2")
    _accepted(capevolve, clone, projects)
