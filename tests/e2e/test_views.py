"""report.md and dashboard.html are drawn again only when what they show moved (``views.json``),
and a resume that changed nothing imports no scipy nor hypothesis; the dashboard reads the index, opening only
the rollout files whose feedback it shows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from run_log import rollout_files

from pytest_capevolve._cli.main import main
from pytest_capevolve._store.rundir import RunDir

# hypothesis's plugin is what these sessions must keep from loading hypothesis: autoloaded, as a user's
pytestmark = pytest.mark.autoload

PROBE = """
import sys

def pytest_unconfigure(config):
    print("SCIPY=" + str("scipy.stats" in sys.modules))
    print("HYPOTHESIS=" + str("hypothesis" in sys.modules))
"""


def _pages(project: Path, projects) -> tuple[int, int]:
    run = projects.run_dir(project)
    return (run / "report.md").stat().st_mtime_ns, (run / "dashboard.html").stat().st_mtime_ns


def test_a_resume_that_changed_nothing_draws_nothing_and_any_change_draws_again(
    example, projects, capevolve, pytester
) -> None:
    project = example("toy_calc")
    pytester.makeconftest(PROBE)
    capevolve(project, "careful").assert_outcomes(passed=14, failed=10)  # the agent's failures
    first = _pages(project, projects)
    assert (projects.run_dir(project) / "views.json").is_file()

    resumed = capevolve(project, "careful", extra=["-s"], subprocess=True)  # a fresh interpreter
    resumed.stdout.fnmatch_lines(["*0 paid, 24 reused*"])
    assert _pages(project, projects) == first  # nothing paid, nothing decided: not drawn again
    resumed.stdout.fnmatch_lines(["SCIPY=False"])  # and the statistics were never loaded
    # nor hypothesis, whose pytest plugin would load it for a summary of no hypothesis test
    resumed.stdout.fnmatch_lines(["HYPOTHESIS=False"])

    # a failed rollout's feedback edited by hand (its outcome as logged), in place: no file came or
    # went, so the resume trusts the sealed summary and neither reads the file nor draws the pages;
    # the reader of its bytes holds them to the sha256 its event recorded (the dashboard's drill-down
    # here; tests/e2e/test_attacks_rollout_bytes.py the others), quarantines it and never shows the
    # edit, and the next session pays it again
    run = RunDir(projects.run_dir(project))
    path = next(p for p in rollout_files(run.root, "careful") if json.loads(p.read_text())["reward"] == 0.0)
    record = json.loads(path.read_text())
    true_feedback = record["feedback"]
    record.update(feedback="edited by hand")
    path.write_text(json.dumps(record))
    capevolve(project, "careful", extra=["-n", "2"]).stdout.fnmatch_lines(["*0 paid, 24 reused*"])
    assert _pages(project, projects) == first and path.is_file()
    assert main(["dashboard", str(project)]) == 0
    assert "edited by hand" not in (run.root / "dashboard.html").read_text()
    assert not path.exists() and list((run.root / "rollouts" / ".quarantine" / "val").glob(f"{path.name}.*"))
    capevolve(project, "careful", extra=["-n", "2"]).stdout.fnmatch_lines(["*1 paid, 23 reused*"])
    second = _pages(project, projects)  # the controller draws them under xdist too
    assert second[0] != first[0] and second[1] != first[1]
    assert "edited by hand" not in (run.root / "dashboard.html").read_text()
    assert json.loads(path.read_text())["feedback"] == true_feedback != "edited by hand"

    # an event a page shows (a decision booked elsewhere), then a page deleted by hand
    run.log.append_event("decision", tag="careful", parent="seed", decision="reject", basis="manual")
    run.state.update_state(lambda s: s.update(iterations=s["iterations"] + 1, stall=s["stall"] + 1))
    capevolve(project, "careful")
    third = _pages(project, projects)
    assert third != second
    (run.root / "dashboard.html").unlink()
    capevolve(project, "careful")
    assert (run.root / "dashboard.html").is_file()


def test_a_gate_session_and_capevolve_gate_import_only_what_they_use(example, capevolve, pytester) -> None:
    """A gate session decides without scipy.stats (seconds to import on a busy machine: its
    planning figures come from scipy.special) and without hypothesis. A command that reads a
    run registers itself only: no pytest, adapter runner, hill-climb or importer is loaded to
    re-derive a verdict."""
    project = example("toy_calc")
    pytester.makeconftest(PROBE)
    gated = capevolve(project, "careful", gate=True, extra=["-s"], subprocess=True)  # a fresh interpreter
    gated.stdout.fnmatch_lines(["*careful*ACCEPT*", "*val reuse*", "SCIPY=False", "HYPOTHESIS=False"])
    probe = (
        "import sys\nfrom pytest_capevolve._cli.main import main\n"
        f"code = main(['gate', 'careful', '--project', {str(project)!r}])\n"
        "heavy = ('pytest', 'pytest_capevolve._engine.runner', 'pytest_capevolve._loop.hill_climb',"
        " 'pytest_capevolve._loop.cap_evolve.importer')\n"
        "print('CODE', code, 'LOADED', sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.stdout.splitlines()[-1] == "CODE 0 LOADED []", done.stdout + done.stderr


STRATEGY_SCORER = """

class StrategyScorer(ToyCalcAdapter):
    def score(self, task, rollout):
        from hypothesis import strategies as st

        st.lists(st.integers()).wrapped_strategy  # harness code drawing up a strategy
        return super().score(task, rollout)
"""


def test_harness_code_using_hypothesis_scores_as_with_its_plugin_loaded(
    example, projects, capevolve, pytester
) -> None:
    """The session blocks hypothesis's plugin but keeps its session start, where hypothesis's
    start-up ends: blocked whole, every score drawing up a strategy was warned of slow code in
    a plugin, and under ``filterwarnings = error`` each rollout was an infra error."""
    project = example("toy_calc")
    projects.add_adapter(project, STRATEGY_SCORER, "adapter.py:StrategyScorer")
    (pytester.path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    result = capevolve(project, "careful", subprocess=True)  # a fresh interpreter: hypothesis unloaded
    records = projects.rollout_records(project)
    assert len(records) == 24 and all(r["infra_error"] is None for r in records.values()), result.stdout.str()
    assert result.ret == 0, result.stdout.str()
