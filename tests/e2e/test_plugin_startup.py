"""Installing the plugin costs a pytest run that never asks for capevolve nothing heavy."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

PROBE = """
import sys

def pytest_unconfigure(config):
    loaded = sorted(m for m in ("numpy", "scipy", "yaml", "git") if m in sys.modules)
    ours = sorted(m for m in sys.modules if m.startswith("pytest_capevolve."))
    print("LOADED=" + ",".join(loaded))
    print("OURS=" + ",".join(ours))
"""


@pytest.mark.autoload  # what installing the plugin costs: loaded as pytest loads it, beside the others
def test_a_plain_session_imports_neither_numpy_nor_scipy(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(PROBE)
    # an ordinary test of someone else's (it uses a pytest fixture, as real tests do)
    pytester.makepyfile(test_unrelated="def test_one(tmp_path):\n    assert tmp_path.is_dir()\n")
    # a fresh interpreter: this test process has numpy loaded already
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "pytest_capevolve.plugin" in result.stdout.str()  # the plugin was loaded...
    result.stdout.fnmatch_lines(["LOADED=", "OURS=*pytest_capevolve.plugin*"])  # ...and nothing heavy
    ours = next(line for line in result.stdout.lines if line.startswith("OURS=")).split("=")[1].split(",")
    assert not [m for m in ours if m.startswith(("pytest_capevolve._session", "pytest_capevolve._store"))]
    # nor any floor of ours: the plugin and its hook specs, nothing else (the spec's ini keys
    # are written out in the plugin; the adapter's names are imported on first use)
    assert set(ours) == {"pytest_capevolve.plugin", "pytest_capevolve.hookspec"}


# what only a gate, a spend report or a screen reads: a resume with nothing owed imports none of it
GATE_ONLY = (
    "pytest_capevolve._decide.gate",
    "pytest_capevolve._decide.screen",
    "pytest_capevolve._policy.budget.spend",
    "pytest_capevolve._policy.gate.regate",
    "pytest_capevolve._policy.gate.verdicts",
    "pytest_capevolve._stats.intervals",
    "pytest_capevolve._stats.sign_flip",
)
IN_PROCESS = """
import sys, pytest
code = pytest.main(["-q", "-p", "no:cacheprovider", "--capevolve-run", sys.argv[1]])
print("LOADED=" + ",".join(m for m in sys.argv[2:] if m in sys.modules))
sys.exit(code)
"""


def test_a_resume_with_nothing_owed_imports_no_gate(
    pytester: pytest.Pytester, one_trial_baseline: Path
) -> None:
    result = pytester.run(sys.executable, "-c", IN_PROCESS, str(one_trial_baseline), *GATE_ONLY)
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*0 paid, * reused*", "LOADED="])


# what an xdist worker finds imported as its session ends: it runs the rollouts it is sent, and
# imports none of what only the controller's planning, gate and report read
WORKER_PROBE = """
import os, sys

def pytest_unconfigure(config):
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        loaded = [m for m in {modules!r} if m in sys.modules]
        with open(os.path.join(os.environ["CAPEVOLVE_PROBE_OUT"], worker["workerid"]), "w") as out:
            out.write(",".join(loaded))
"""
CONTROLLER_ONLY = ("numpy", "scipy", "pytest_capevolve._session.kinds", "pytest_capevolve._session.starting")


def test_an_xdist_worker_imports_neither_numpy_nor_the_session_kinds(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    (project / "conftest.py").write_text(WORKER_PROBE.format(modules=CONTROLLER_ONLY))
    seen = pytester.path / "seen"
    seen.mkdir()
    monkeypatch.setenv("CAPEVOLVE_PROBE_OUT", str(seen))
    result = capevolve(project, extra=["-n", "2"])
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*40 paid, 0 reused*"])
    assert {path.name: path.read_text() for path in seen.iterdir()} == {"gw0": "", "gw1": ""}
