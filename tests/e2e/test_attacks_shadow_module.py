"""A module planted in the project under the name of one the scoring process imports at first use
(the standard library's, an installed package's): pytest puts a folder holding a ``conftest.py`` at
the front of ``sys.path``, so the planted file is imported in its place, in the process that scores
and records, without touching any file the harness lock held."""

from __future__ import annotations

import subprocess
import sys

import pytest

# the planted module: it notes that it ran in the scoring process, then hands over the real one
SHADOW = """
import importlib, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "SHADOW_RAN"), "a") as out:
    out.write(f"{__name__} in {os.getpid()}\\n")
del sys.modules[__name__]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
sys.modules[__name__] = importlib.import_module(__name__)
"""


@pytest.mark.unconfined  # planting in the project: an optimizer outside the boundary, as the same user
@pytest.mark.attack(
    "harness",
    attack="after the baseline, `configparser.py` (a module the scoring process imports at first use) "
    "planted in a project whose pytest config is `tox.ini` and that holds a `conftest.py` (pytest puts "
    "its folder first on `sys.path`): it ran inside the next gate session's own process, unlocked (no "
    "file the harness lock held had moved)",
    outcome="refused before it runs: the config file is parsed with the standard library's own modules, "
    "and a module in a folder pytest puts first on `sys.path` for a `conftest.py` that shadows one of "
    "the interpreter's (the standard library's, an installed package's) is locked with the harness, so the planted file is a changed harness (exit 4)",
)
def test_a_module_planted_under_a_stdlib_name_never_runs_in_the_scoring_process(example):
    project = example("toy_calc")
    (project / "tox.ini").write_text("[pytest]\n")
    (project / "conftest.py").write_text("")

    def session(*args: str) -> subprocess.CompletedProcess[str]:
        # from the project's folder, as its README says (`pytest --capevolve-run .`); -P: not the cwd
        argv = [sys.executable, "-P", "-m", "pytest", "--capevolve-run", ".", "-p", "no:cacheprovider", *args]
        return subprocess.run(argv, cwd=project, capture_output=True, text=True, check=False)

    baseline = session()
    assert baseline.returncode == 0, baseline.stdout
    (project / "configparser.py").write_text(SHADOW)
    again = session("--capevolve-candidate", "candidates/careful", "--capevolve-gate")
    assert not (project / "SHADOW_RAN").exists(), (project / "SHADOW_RAN").read_text()
    assert again.returncode == pytest.ExitCode.USAGE_ERROR, again.stdout
    assert "configparser.py" in again.stdout + again.stderr
