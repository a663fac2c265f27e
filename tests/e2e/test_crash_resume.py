"""Crash safety: a killed controller or worker loses no persisted rollout, and the next run
pays only for what is missing."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

# run_target runs in a sandbox child of the process that runs the items (the session, or a
# worker): the child's parent, and its parent in turn
ANCESTOR = """

import os as _os


def _ancestor(levels):
    pid = _os.getpid()
    for _ in range(levels):
        with open(f"/proc/{pid}/stat") as stat:
            pid = int(stat.read().rsplit(")", 1)[1].split()[1])
    return pid
"""

CRASHY = """

import os
import signal as _signal


class CrashyAdapter(ToyCalcAdapter):
    \"\"\"Kills a process part-way through, as chosen by environment variables. From score(), which
    runs in the process that scores the items (the session, or a worker) — outside the boundary
    candidate code runs in, whose child cannot signal that process. "self" is that process,
    "parent" its parent (xdist's controller).\"\"\"

    def run_target(self, task, ctx, *, seed):
        rollout = super().run_target(task, ctx, seed=seed)
        careful = "multiply carefully" in (ctx / "prompt.md").read_text().lower()
        rollout.metadata = {**(rollout.metadata or {}), "careful": careful}
        return rollout

    def score(self, task, rollout):
        log = Path(__file__).with_name("calls.log")
        with log.open("a") as handle:
            handle.write(task.id + "\\n")
        calls = len(log.read_text().splitlines())
        after = os.environ.get("CAPEVOLVE_TEST_KILL_AFTER")
        if after and calls > int(after):
            who = os.environ["CAPEVOLVE_TEST_KILL_WHO"]
            os.kill(os.getppid() if who == "parent" else os.getpid(), _signal.SIGKILL)
        victim = os.environ.get("CAPEVOLVE_TEST_EXIT_ON")
        careful = rollout.metadata.get("careful")
        if victim and os.environ.get("PYTEST_XDIST_WORKER") and task.id == victim and careful:
            os.kill(os.getpid(), _signal.SIGKILL)  # the worker dies
        return super().score(task, rollout)
"""


@pytest.fixture
def crashy_project(example, projects) -> Path:
    """toy_calc whose adapter kills a process part-way through, as the environment says."""
    project = example("toy_calc")
    projects.add_adapter(project, CRASHY, "adapter.py:CrashyAdapter")
    return project


@pytest.fixture
def clean_careful(built, example, capevolve) -> Path:
    """toy_calc after an uncrashed session of 'careful': the records a crash and resume must end
    at, built once per process (``built``)."""

    def make() -> tuple[Path, None]:
        clean = example("toy_calc", dest="clean")
        assert capevolve(clean, "careful").ret == 0
        return clean, None

    return built("toy-calc-careful-clean", "clean", make)[0]


@pytest.mark.attack(
    "candidate-code",
    attack="the same, by killing its own session (`os.kill` of the process that runs it)",
    outcome=(
        "confined, prevented by signal scoping (the section above); **unconfined, not held by a "
        "file-level guard**: the rollout in flight leaves no outcome and the next session pays it "
        "again, and every view says the run was unconfined"
    ),
    note="what a killed session leaves",
)
@pytest.mark.attack(
    "held-before",
    attack="`kill -9` of a whole session, then a resume",
    outcome="the same records, nothing paid twice",
)
@pytest.mark.parametrize(
    "mode, who",
    [
        pytest.param([], "self", id="controller-no-xdist"),
        pytest.param(["-n", "2"], "parent", id="controller-under-xdist"),
        pytest.param(["-n", "2"], "self", id="worker"),
    ],
)
def test_sigkilled_run_resumes_to_the_same_records(
    clean_careful: Path,
    projects,
    capevolve,
    crashy_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: list[str],
    who: str,
) -> None:
    expected = projects.rollout_records(clean_careful)

    project = crashy_project
    monkeypatch.setenv("CAPEVOLVE_TEST_KILL_AFTER", "9")
    monkeypatch.setenv("CAPEVOLVE_TEST_KILL_WHO", who)
    # a worker that kills itself kills each worker xdist starts in its place (every call after the
    # ninth kills): the first kill is the case, not xdist's eight restarts of it
    restarts = ["--max-worker-restart", "0"] if who == "self" and mode else []
    crashed = capevolve(project, "careful", extra=[*mode, *restarts], subprocess=True, timeout=300)
    assert crashed.ret != 0
    if who == "parent" or not mode:
        assert crashed.ret == -signal.SIGKILL
    on_disk = projects.rollout_records(project)  # every persisted file is whole JSON
    assert all(expected[key] == record for key, record in on_disk.items())
    # recorded: a file with its event. A kill between a file and its event leaves a file the log
    # never recorded (nor its cost): not evidence, so it is paid again like any missing rollout
    events = (projects.run_dir(project) / "events.jsonl").read_text().splitlines()
    logged = {
        (e["split"], e["task_id"], e["tag"], e["trial"])
        for e in map(json.loads, events)
        if e["kind"] == "rollout"
    }
    partial = {key: record for key, record in on_disk.items() if key in logged}
    assert 0 < len(partial) < 24 and len(on_disk) - len(partial) <= 1

    monkeypatch.delenv("CAPEVOLVE_TEST_KILL_AFTER")
    # kills nothing: in process, and in one process in every mode (what a crash left is on disk,
    # the same whoever reads it; a resume over -n 2: tests/e2e/test_run_e2e.py)
    resumed = capevolve(project, "careful")
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
    result = capevolve(project, "careful", extra=["-n", "2"], subprocess=True, timeout=300)
    assert result.ret == 12, result.stdout.str()
    result.stdout.fnmatch_lines(["*worker gw* died*its rollouts are missing*", "1 rollout is missing*"])
    records = projects.rollout_records(project)
    assert len(records) == 23
    assert ("val", victim, "careful", 0) not in records

    monkeypatch.delenv("CAPEVOLVE_TEST_EXIT_ON")
    # the resume kills nothing: in process, in one process (a resume over -n 2:
    # tests/e2e/test_run_e2e.py)
    resumed = capevolve(project, "careful")
    assert resumed.ret == 0
    resumed.stdout.fnmatch_lines(["rollouts: 1 paid, 23 reused*"])
    assert records_without(projects.rollout_records(project), victim) == records


def records_without(records: dict, task_id: str) -> dict:
    return {k: v for k, v in records.items() if not (k[1] == task_id and k[2] == "careful")}


EIGHT_IN_FLIGHT = (
    ANCESTOR
    + """

import fcntl as _fcntl
import signal as _signal
import threading as _threading


class EightInFlightAdapter(ToyCalcAdapter):
    \"\"\"Logs every paid rollout with the worker's pid. On worker gw0 (once), calls wait until 8
    are in flight and the 8th kills the worker: it dies holding 8 rollouts it paid and never
    reported. Counted in the log under a lock: each candidate runs in a sandbox child of its own.\"\"\"

    _never = _threading.Event()

    def run_target(self, task, ctx, *, seed):
        here = Path(__file__).parent
        worker = _ancestor(1)
        with open(here / "calls.log", "a+") as log:
            _fcntl.flock(log, _fcntl.LOCK_EX)
            log.write(f"{worker} {task.id} {Path(ctx).name} {seed}\\n")  # its snapshot folder
            log.flush()
            log.seek(0)
            now = sum(1 for line in log.read().splitlines() if line.split()[0] == str(worker))
        doomed = _os.environ.get("PYTEST_XDIST_WORKER") == "gw0" and not (here / "killed").exists()
        if doomed and now == 8:
            (here / "killed").write_text(str(worker))
            _os.kill(worker, _signal.SIGKILL)
        if doomed:
            EightInFlightAdapter._never.wait(60)  # held in flight until the 8th call kills this process
        return super().run_target(task, ctx, seed=seed)
"""
)


@pytest.mark.attack(
    "held-before",
    attack="a worker killed with eight rollouts in flight",
    outcome="only those eight are lost",
)
@pytest.mark.unconfined
def test_a_worker_killed_with_eight_in_flight_loses_only_those_eight(example, projects, capevolve) -> None:
    """Unconfined on purpose: the adapter stands in for whatever kills a worker while its sandbox child
    holds 8 rollouts in flight, and sends the kill from that child; a confined child cannot signal
    outside its domain (the boundary's promise, tests/e2e/test_boundary.py), and nothing outside it
    knows when 8 are in flight."""
    clean = example("toy_calc", dest="clean")
    projects.edit_spec(clean, "num_trials: 1", "num_trials: 5")  # 120 items: gw0 owns >= 8 at once
    assert capevolve(clean, "careful").ret == 0
    expected = projects.rollout_records(clean)

    project = example("toy_calc")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 5")
    projects.add_adapter(project, EIGHT_IN_FLIGHT, "adapter.py:EightInFlightAdapter")
    concurrent = ["-n", "2", "--capevolve-concurrency", "8"]
    crashed = capevolve(project, "careful", extra=concurrent, subprocess=True, timeout=300)
    assert crashed.ret == 12, crashed.stdout.str()  # a worker died: infrastructure failure
    crashed.stdout.fnmatch_lines(["*worker gw0 died*"])
    victim = (project / "killed").read_text()
    calls = [line.split() for line in (project / "calls.log").read_text().splitlines()]
    tags = projects.tags_by_folder(project)
    lost = [(task, tags[folder], int(seed)) for pid, task, folder, seed in calls if pid == victim]
    assert len(lost) == 8  # the dead worker paid for exactly the 8 it had in flight
    records = projects.rollout_records(project)
    assert all(expected[key] == record for key, record in records.items())
    # the controller re-queued the dead worker's other items: only the one it was running is missing
    missing = set(expected) - set(records)
    assert len(missing) == 1
    (key,) = missing
    assert (key[1], key[2], key[3]) in lost  # a rollout runs from its tag's snapshot
    # paid: every rollout once, except the one missing, plus at most the 8 the dead worker had in
    # flight (xdist >= 3.6 re-queues all 8; 3.5 lets the worker report some of them before it dies)
    assert 120 - 1 <= len(calls) <= 120 - 1 + 8

    # the resume kills nothing (the kill happened once): in process, in one process (a resume over
    # -n 2: tests/e2e/test_run_e2e.py)
    resumed = capevolve(project, "careful")
    assert resumed.ret == 0, resumed.stdout.str()
    resumed.stdout.fnmatch_lines(["rollouts: 1 paid, 119 reused*"])
    assert projects.rollout_records(project) == expected
