"""Crash safety: a killed controller or worker loses no persisted rollout, and the next run
pays only for what is missing."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

CRASHY = '''

import os
import signal as _signal


class CrashyAdapter(ToyCalcAdapter):
    """Kills a process part-way through, as chosen by environment variables."""

    def run_target(self, task, ctx, *, seed):
        log = Path(__file__).with_name("calls.log")
        with log.open("a") as handle:
            handle.write(task.id + "\\n")
        calls = len(log.read_text().splitlines())
        after = os.environ.get("CAPEVOLVE_TEST_KILL_AFTER")
        if after and calls > int(after):
            who = os.environ["CAPEVOLVE_TEST_KILL_WHO"]
            os.kill(os.getppid() if who == "parent" else os.getpid(), _signal.SIGKILL)
        victim = os.environ.get("CAPEVOLVE_TEST_EXIT_ON")
        if victim and os.environ.get("PYTEST_XDIST_WORKER") and task.id == victim and ctx.name == "careful":
            os._exit(3)
        return super().run_target(task, ctx, seed=seed)
'''


@pytest.fixture
def crashy_project(example, projects) -> Path:
    """toy_calc whose adapter kills a process part-way through, as the environment says."""
    project = example("toy_calc")
    projects.add_adapter(project, CRASHY, "adapter.py:CrashyAdapter")
    return project


@pytest.mark.parametrize(
    "mode, who",
    [
        pytest.param([], "self", id="controller-no-xdist"),
        pytest.param(["-n", "2"], "parent", id="controller-under-xdist"),
        pytest.param(["-n", "2"], "self", id="worker"),
    ],
)
def test_sigkilled_run_resumes_to_the_same_records(
    example,
    projects,
    capevolve,
    crashy_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: list[str],
    who: str,
) -> None:
    clean = example("toy_calc", dest="clean")
    assert capevolve(clean, "careful").ret == 0
    expected = projects.rollout_records(clean)

    project = crashy_project
    monkeypatch.setenv("CAPEVOLVE_TEST_KILL_AFTER", "9")
    monkeypatch.setenv("CAPEVOLVE_TEST_KILL_WHO", who)
    crashed = capevolve(project, "careful", extra=mode, subprocess=True, timeout=120)
    assert crashed.ret != 0
    if who == "parent" or not mode:
        assert crashed.ret == -signal.SIGKILL
    partial = projects.rollout_records(project)  # every persisted file is whole JSON
    assert 0 < len(partial) < 24
    assert all(expected[key] == record for key, record in partial.items())

    monkeypatch.delenv("CAPEVOLVE_TEST_KILL_AFTER")
    resumed = capevolve(project, "careful", extra=mode, subprocess=True, timeout=120)
    assert resumed.ret == 0, resumed.stdout.str()
    resumed.stdout.fnmatch_lines([f"rollouts: {24 - len(partial)} paid, {len(partial)} reused*"])
    assert projects.rollout_records(project) == expected


def test_worker_that_dies_is_reported_and_its_rollout_missing(
    projects, capevolve, crashy_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = crashy_project
    # run once without the crash to learn the split, then start over in a new run
    monkeypatch.setenv("CAPEVOLVE_TEST_EXIT_ON", "none")
    capevolve(project, "careful", extra=["--collect-only"])
    splits = json.loads((projects.run_dir(project) / "splits.json").read_text())
    victim = splits["val"][3]
    monkeypatch.setenv("CAPEVOLVE_TEST_EXIT_ON", victim)
    result = capevolve(project, "careful", extra=["-n", "2"], subprocess=True, timeout=120)
    assert result.ret == 12, result.stdout.str()
    result.stdout.fnmatch_lines(["*worker gw* died*its rollouts are missing*", "1 rollouts are missing*"])
    records = projects.rollout_records(project)
    assert len(records) == 23
    assert ("val", victim, "careful", 0) not in records

    monkeypatch.delenv("CAPEVOLVE_TEST_EXIT_ON")
    resumed = capevolve(project, "careful", extra=["-n", "2"], subprocess=True, timeout=120)
    assert resumed.ret == 0
    resumed.stdout.fnmatch_lines(["rollouts: 1 paid, 23 reused*"])
    assert records_without(projects.rollout_records(project), victim) == records


def records_without(records: dict, task_id: str) -> dict:
    return {k: v for k, v in records.items() if not (k[1] == task_id and k[2] == "careful")}
