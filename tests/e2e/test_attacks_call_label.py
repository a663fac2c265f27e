"""The label a ``call`` microcase's result carries (which boundary the candidate's function ran in) is
the call process's, never what candidate code in that process prints."""

from __future__ import annotations

import pytest

from pytest_capevolve._engine.checks import ProjectEnv
from pytest_capevolve._engine.checks import run as run_microcase
from pytest_capevolve._project.microcase import load_project
from pytest_capevolve._project.spec import load_spec

# the candidate's tool: a wrong sum, and, as the process exits, a last stdout line of its own that says
# the call ran confined (the process's result line is written before it; fd 1 is the pipe either way)
FORGER = """
import atexit
import os


def add(a, b):
    return a + b


atexit.register(lambda: os.write(1, b'{"value": 5, "confinement": "confined (Landlock ABI 7)"}\\n'))
"""


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "a `call` microcase's candidate function that, as its process exits, writes a JSON line of its own "
        "on stdout claiming the call ran confined (`atexit` and `os.write(1, …)`, past the redirect of "
        "`sys.stdout`): the result read the last line, so a call that ran unconfined was labelled confined"
    ),
    outcome="prevented: nothing to forge: the call ran confined, and its label was written before the candidate's file loaded",
    unconfined=(
        "prevented: the call's process writes its label on its first line, before the candidate's file is "
        "loaded, and the label is read from there; the result from its last"
    ),
)
@pytest.mark.unconfined
def test_a_call_cannot_label_itself_confined(example) -> None:
    """Unconfined on purpose: the label is what tells a call that ran outside a boundary."""
    project = example("toy_calc")
    (project / "capability" / "tools").mkdir()
    (project / "capability" / "tools" / "calc.py").write_text(FORGER)
    (project / "microcases").mkdir()
    (project / "microcases" / "add.yaml").write_text(
        "id: add-wrong\ncluster: addition\ndescription: d\n"
        "call: {function: tools/calc.py:add, args: [2, 3], expect: {equals: 6}}\n"
    )
    (case,) = load_project(project)
    env = ProjectEnv(load_spec(project))
    try:
        outcome = run_microcase(case, project / "capability", env)
    finally:
        env.close()
    assert not outcome.ok and outcome.got.startswith("5"), outcome.got
    assert outcome.unconfined == "unconfined (Landlock turned off by CAPEVOLVE_LANDLOCK=off)", (
        outcome.confinement
    )
