"""report.md and dashboard.html are drawn again only when what they show moved (``views.json``),
and a resume that changed nothing imports no scipy; the dashboard reads the index, opening only
the rollout files whose feedback it shows."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_capevolve._session import exitcodes
from pytest_capevolve._show.dashboard import build, model
from pytest_capevolve._store.rollout_files import RolloutFiles
from pytest_capevolve._store.rundir import RunDir

PROBE = """
import sys

def pytest_unconfigure(config):
    print("SCIPY=" + str("scipy.stats" in sys.modules))
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

    # a rollout edited by hand: the index reads it again, so the pages move with it
    run = RunDir(projects.run_dir(project))
    path = next((run.root / "rollouts" / "val").glob("*__careful__t0.json"))
    record = json.loads(path.read_text())
    record.update(reward=0.0, passed=False, feedback="edited by hand")
    path.write_text(json.dumps(record))
    capevolve(project, "careful", extra=["-n", "2"])  # the controller draws them under xdist too
    second = _pages(project, projects)
    assert second[0] != first[0] and second[1] != first[1]
    assert "edited by hand" in (run.root / "dashboard.html").read_text()

    # an event a page shows (a decision booked elsewhere), then a page deleted by hand
    run.log.append_event("decision", tag="careful", parent="seed", decision="reject", basis="manual")
    capevolve(project, "careful")
    third = _pages(project, projects)
    assert third != second
    (run.root / "dashboard.html").unlink()
    capevolve(project, "careful")
    assert (run.root / "dashboard.html").is_file()


def test_the_dashboard_opens_only_the_files_it_details(tmp_path, val_rollout, monkeypatch) -> None:
    """Outcome fields come from the index; feedback and output only for the first
    DETAIL_LIMIT rollouts below 1, each read from its file — never every rollout file."""
    rundir = RunDir(tmp_path / ".capevolve" / "runs" / "r1")
    rundir.root.mkdir(parents=True)
    tasks = [f"t{i}" for i in range(6)]
    rundir.ensure_splits(lambda: {"train": [], "val": tasks, "test": []})
    for i, task in enumerate(tasks):
        reward = 1.0 if i % 2 else 0.0
        record = val_rollout("seed", task, 0, reward)
        rundir.rollouts.record_rollout(
            dataclasses.replace(record, feedback=f"feedback-{task}", output=f"out-{task}")
        )
    rundir.flush()
    monkeypatch.setattr(model, "DETAIL_LIMIT", 2)
    opened: list[tuple] = []
    read_rollout = RolloutFiles.read_rollout

    def counting(self, *key):
        opened.append(key)
        return read_rollout(self, *key)

    monkeypatch.setattr(RolloutFiles, "read_rollout", counting)
    monkeypatch.setattr(RolloutFiles, "rollouts", lambda *a, **k: pytest.fail("read every rollout file"))
    page = build(RunDir(rundir.root), num_trials=1)
    assert opened == [("val", "t0", "seed", 0), ("val", "t2", "seed", 0)]  # the first two failures
    assert "feedback-t0" in page and "feedback-t2" in page and "out-t2" in page
    assert "feedback-t4" not in page and "feedback-t1" not in page  # t4 past the limit; t1 passed
    assert page.count('<td class="feedback">·</td>') == 4  # shown without detail, reward only


def test_capevolve_gate_imports_only_what_it_uses(example, capevolve) -> None:
    """A command that reads a run registers itself only: no pytest, adapter runner, hill-climb
    or importer is loaded to re-derive a verdict."""
    project = example("toy_calc")
    capevolve(project, "careful")
    probe = (
        "import sys\nfrom pytest_capevolve._cli.main import main\n"
        f"code = main(['gate', 'careful', '--project', {str(project)!r}])\n"
        "heavy = ('pytest', 'pytest_capevolve._engine.runner', 'pytest_capevolve._loop.hill_climb',"
        " 'pytest_capevolve._loop.cap_evolve.importer')\n"
        "print('CODE', code, 'LOADED', sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.stdout.splitlines()[-1] == "CODE 0 LOADED []", done.stdout + done.stderr


def test_the_exit_codes_a_session_replaces_are_pytests() -> None:
    replaceable = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)
    assert exitcodes.REPLACEABLE == replaceable
