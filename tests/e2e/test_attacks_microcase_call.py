"""A ``call`` microcase runs a function of the candidate: candidate code, run outside the sandbox
child (its own process, `_engine/callcheck.py`). Replays of what that code could reach there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_capevolve._confine import landlock
from pytest_capevolve._engine.checks import ProjectEnv
from pytest_capevolve._engine.checks import run as run_microcase
from pytest_capevolve._project.microcase import load_project
from pytest_capevolve._project.spec import load_spec

# the candidate's tool: what a gate session's microcase screen runs when it calls peek(); each
# attempt says what it got ("refused: ..." when the kernel refused it)
PEEK = """
import os


def _try(what):
    try:
        return what()
    except OSError as exc:
        return "refused: " + type(exc).__name__


def _read(path):
    with open(path) as file:
        return file.read()


def _write(path):
    with open(path, "w") as file:
        file.write("import os  # planted above the project by a microcase call\\n")
    return "written"


def peek(project):
    return {
        "splits": _try(lambda: _read(os.path.join(project, ".capevolve", "runs", "r1", "splits.json"))),
        "gold": _try(lambda: _read(os.path.join(project, "answers.json"))),
        "planted": _try(lambda: _write(os.path.join(os.path.dirname(project), "conftest.py"))),
    }
"""


def _peeking_project(example) -> tuple[Path, ProjectEnv]:
    project = example("toy_calc")
    (project / "capability" / "tools").mkdir()
    (project / "capability" / "tools" / "peek.py").write_text(PEEK)
    (project / "answers.json").write_text(json.dumps({"q00": "GOLD-10"}))  # a gold file (harness_files)
    run = project / ".capevolve" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "splits.json").write_text(json.dumps({"test": ["SEALED-q07"]}))
    (project / "microcases").mkdir()
    (project / "microcases" / "peek.yaml").write_text(
        "id: peek\ncluster: tools\ndescription: the tool peeks.\n"
        f"call: {{function: tools/peek.py:peek, args: [{str(project)!r}], expect: {{equals: null}}}}\n"
    )
    return project, ProjectEnv(load_spec(project))


@pytest.mark.confined
@pytest.mark.skipif(landlock.abi() == 0, reason="the kernel offers no Landlock here")
@pytest.mark.attack(
    "kernel-boundary",
    attack="a candidate function a `call` microcase names (run by a gate session's microcase screen, "
    "the broker's included, before any rollout) that reads the run dir (the sealed test split) and "
    "a gold file and writes `conftest.py` above the project: it ran in a process of its own but "
    "outside the boundary, with the evaluator's rights (before: all three done)",
    outcome="prevented: the call's process confines itself to the sandbox child's boundary (its "
    "candidate folder readable, a scratch `TMPDIR` writable, the run dir and gold hidden) before it "
    "loads the candidate's file: each attempt EACCES",
    unconfined="labelled unconfined, as a sandbox child (the log's own checks are another section's)",
)
def test_a_call_microcase_runs_the_candidates_function_inside_the_boundary(example):
    project, env = _peeking_project(example)
    (case,) = load_project(project)
    outcome = run_microcase(case, project / "capability", env)
    assert not outcome.ok  # peek returns what it got, never None
    assert "SEALED-q07" not in outcome.got and "GOLD-10" not in outcome.got, outcome.got
    assert not (project.parent / "conftest.py").exists()
    got = outcome.got
    assert got.count("refused: PermissionError") == 3, got
    assert outcome.confinement.startswith("confined (Landlock ABI") and outcome.unconfined is None


@pytest.mark.attack(
    "kernel-boundary",
    attack="a candidate function a `call` microcase names (run by a gate session's microcase screen, "
    "the broker's included, before any rollout) that reads the run dir (the sealed test split) and "
    "a gold file and writes `conftest.py` above the project: it ran in a process of its own but "
    "outside the boundary, with the evaluator's rights (before: all three done)",
    note="an honest call imports beside itself and writes its TMPDIR, confined",
)
def test_an_honest_call_microcase_still_passes_confined(example):
    """The boundary costs an honest call nothing: it imports beside itself and writes its TMPDIR."""
    project = example("toy_calc")
    tools = project / "capability" / "tools"
    tools.mkdir()
    (tools / "helper.py").write_text("def double(x):\n    return 2 * x\n")
    (tools / "calc.py").write_text(
        "import tempfile\nfrom helper import double\n\n\ndef twice(x):\n"
        "    with tempfile.NamedTemporaryFile('w') as scratch:\n        scratch.write('ok')\n"
        "    return double(x)\n"
    )
    (project / "microcases").mkdir()
    (project / "microcases" / "twice.yaml").write_text(
        "id: twice\ncluster: tools\ndescription: twice doubles.\n"
        "call: {function: tools/calc.py:twice, args: [21], expect: {equals: 42}}\n"
    )
    (case,) = load_project(project)
    outcome = run_microcase(case, project / "capability", ProjectEnv(load_spec(project)))
    assert outcome.ok, outcome.got
