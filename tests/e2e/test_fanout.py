"""Rollouts in flight within one process: ``--capevolve-concurrency K``.

The adapters below prove concurrency with barriers, not clocks: K calls can only pass a
barrier of K parties if K are in flight at once, and each call logs how many were in flight
when it arrived, so the log's maximum is the most that ever ran together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

IN_FLIGHT = '''

import os as _os
import threading as _threading


class InFlightAdapter(ToyCalcAdapter):
    """Every call waits at a barrier of K parties (K from CAPEVOLVE_TEST_WIDTH)."""

    width = int(_os.environ["CAPEVOLVE_TEST_WIDTH"])
    _lock = _threading.Lock()
    _now = 0
    _barrier = _threading.Barrier(width, timeout=60)

    def run_target(self, task, ctx, *, seed):
        cls = InFlightAdapter
        with cls._lock:
            cls._now += 1
            with open(Path(__file__).parent / "observed" / "in_flight.log", "a") as log:
                log.write(f"{cls._now} {_threading.get_ident()}\\n")
        try:
            cls._barrier.wait()  # passes only when `width` calls are in flight together
        finally:
            with cls._lock:
                cls._now -= 1
        return super().run_target(task, ctx, seed=seed)
'''

ASYNC_IN_FLIGHT = '''

import asyncio as _asyncio
import os as _os
import threading as _threading


class AsyncInFlightAdapter(ToyCalcAdapter):
    """run_target is async def; every call waits at an asyncio barrier of K parties."""

    width = int(_os.environ["CAPEVOLVE_TEST_WIDTH"])
    _now = 0
    _barrier = None

    async def run_target(self, task, ctx, *, seed):
        cls = AsyncInFlightAdapter
        if cls._barrier is None:
            cls._barrier = _asyncio.Barrier(cls.width)
        cls._now += 1
        with open(Path(__file__).parent / "observed" / "in_flight.log", "a") as log:
            log.write(f"{cls._now} {_os.getpid()}.{_threading.get_ident()}\\n")
        try:
            await _asyncio.wait_for(cls._barrier.wait(), 60)
        finally:
            cls._now -= 1
        return ToyCalcAdapter.run_target(self, task, ctx, seed=seed)
'''


def in_flight_log(project: Path) -> list[tuple[int, str]]:
    lines = (project / "observed" / "in_flight.log").read_text().split("\n")
    return [(int(now), thread) for now, thread in (line.split() for line in lines if line)]


def test_k_rollouts_are_in_flight_at_once_and_never_more(example, projects, capevolve, monkeypatch) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, IN_FLIGHT, "adapter.py:InFlightAdapter")
    projects.writable(project, "observed")  # where run_target notes its calls
    # the seed's 12 items: three groups of 4 meet. Only one candidate: each candidate's rollouts
    # run in a sandbox child of its own (its code never meets another's), where the barrier is
    monkeypatch.setenv("CAPEVOLVE_TEST_WIDTH", "4")
    result = capevolve(project, extra=["--capevolve-concurrency", "4"])
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4, failed=8)  # every barrier passed: no infra error
    log = in_flight_log(project)
    assert len(log) == 12
    assert max(now for now, _ in log) == 4
    assert len({thread for _, thread in log}) > 1  # off the main thread, on threads of their own


@pytest.mark.parametrize("width", [1, 4])
def test_an_async_adapter_runs_k_rollouts_on_one_event_loop(
    example, projects, capevolve, monkeypatch, width: int
) -> None:
    reference = example("toy_calc", dest="reference")
    assert capevolve(reference).ret == 0
    project = example("toy_calc")
    projects.add_adapter(project, ASYNC_IN_FLIGHT, "adapter.py:AsyncInFlightAdapter")
    projects.writable(project, "observed")  # where run_target notes its calls
    monkeypatch.setenv("CAPEVOLVE_TEST_WIDTH", str(width))
    # the seed's 12 rollouts (a barrier meets one candidate's: see the test above)
    result = capevolve(project, extra=["--capevolve-concurrency", str(width)])
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4, failed=8)
    log = in_flight_log(project)
    assert max(now for now, _ in log) == width
    # one event loop on one thread, in the candidate's sandbox child (logged as pid.thread)
    assert len({thread for _, thread in log}) == 1
    assert projects.rollout_records(project) == projects.rollout_records(reference)


UNSAFE = """

class GlobalPromptAdapter(ToyCalcAdapter):
    thread_safe = False  # live() points a module-level variable at the candidate
"""

APPLY_STYLE = """

class ApplyAdapter(ToyCalcAdapter):
    current = None

    def apply(self, candidate_dir):
        ApplyAdapter.current = candidate_dir
"""


@pytest.mark.parametrize(
    "source, ref",
    [(UNSAFE, "adapter.py:GlobalPromptAdapter"), (APPLY_STYLE, "adapter.py:ApplyAdapter")],
    ids=["thread_safe-False", "apply-style"],
)
@pytest.mark.parametrize("asked_by", ["flag", "spec", "ini"])
def test_concurrency_above_one_is_refused_for_an_adapter_that_is_not_thread_safe(
    pytester, example, projects, capevolve, source: str, ref: str, asked_by: str
) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, source, ref)
    if asked_by == "spec":
        with (project / "capevolve.yaml").open("a") as spec:
            spec.write("concurrency: 4\n")
        result = capevolve(project)
    elif asked_by == "ini":
        pytester.makeini("[pytest]\ncapevolve_concurrency = 4\n")
        result = capevolve(project)
    else:
        result = capevolve(project, extra=["--capevolve-concurrency", "4"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    asked = "--capevolve-concurrency 4" if asked_by == "flag" else "concurrency 4 (from capevolve.yaml's*)"
    result.stderr.fnmatch_lines([f"ERROR: {asked}: adapter * is not thread-safe*--capevolve-concurrency 1*"])
    assert not (project / ".capevolve" / "runs").exists() or not any(
        (project / ".capevolve" / "runs").iterdir()
    )
    # one at a time is fine: the flag wins over the spec
    again = capevolve(project, extra=["--capevolve-concurrency", "1"])
    assert again.ret == 0, again.stdout.str()


def test_a_bad_concurrency_flag_is_one_line(example, capevolve) -> None:
    result = capevolve(example("toy_calc"), extra=["--capevolve-concurrency", "0"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--capevolve-concurrency takes a whole number ≥ 1*got '0'"])


# -- the deadline off the main thread ----------------------------------------------------------


HANGING = """

class HangingAdapter(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        import os
        import time as _time

        if "*" in task.input and "multiply carefully" not in (Path(ctx) / "prompt.md").read_text().lower():  # the seed's
            try:  # the first such rollout to get here hangs, the others answer
                os.close(os.open(Path(__file__).parent / "observed" / "hung", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return super().run_target(task, ctx, seed=seed)
            give_up = _time.monotonic() + 60.0  # only the deadline may end it
            while _time.monotonic() < give_up:
                try:
                    _time.sleep(0.01)
                except Exception:
                    continue
        return super().run_target(task, ctx, seed=seed)
"""


def test_a_rollout_past_its_deadline_is_the_candidates_failure_in_a_concurrent_session(
    example, projects, capevolve
) -> None:
    """The one rollout that hangs is ended at its deadline and booked as what the candidate
    caused (issue 37: a reward of 0, labelled, never missing data); the others are scored."""
    project = example("toy_calc")
    projects.add_adapter(project, HANGING, "adapter.py:HangingAdapter")
    projects.writable(project, "observed")  # where run_target notes its calls
    with (project / "capevolve.yaml").open("a") as spec:
        # the other rollouts must finish inside it on a machine at any load (1.5 s was missed at
        # load 30 by a rollout that waited on its sandbox child's start): the hung one waits 60 s
        spec.write("rollout_timeout_s: 5\n")
    result = capevolve(project, "careful", extra=["--capevolve-concurrency", "4"])
    assert result.ret == 0, result.stdout.str()  # no rollout is missing
    records = projects.rollout_records(project)
    hung = {k: r for k, r in records.items() if r["feedback"].startswith("candidate failure: ")}
    assert len(hung) == 1, hung  # one rollout hung (one deadline to wait for, not one per task)
    ((_, _, tag, _), record), *_ = hung.items()
    assert tag == "seed" and "*" in record["input"]
    assert record["metrics"]["candidate_failure"].startswith("timeout") and record["reward"] == 0.0
    others = [r for k, r in records.items() if k not in hung]
    assert len(others) == 23 and all(r["reward"] is not None and r["infra_error"] is None for r in others)


LOGGING = """

class LoggingAdapter(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        with open(Path(__file__).parent / "observed" / "calls.log", "a") as log:
            log.write(f"{task.id} {Path(ctx).name}\\n")  # its snapshot folder (projects.tags_by_folder)
        return super().run_target(task, ctx, seed=seed)
"""

SKIP_CAREFUL = """
import pytest


def pytest_runtest_setup(item):
    if "careful" in item.name:
        pytest.skip("no longer needed (as a sequential gate would decide)")
"""


def test_a_rollout_started_ahead_whose_item_is_skipped_is_dropped_not_persisted(
    pytester, example, projects, capevolve
) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, LOGGING, "adapter.py:LoggingAdapter")
    projects.writable(project, "observed")  # where run_target notes its calls
    pytester.makepyfile(skip_careful=SKIP_CAREFUL)
    pytester.syspathinsert()
    eight = ["--capevolve-concurrency", "8"]
    result = capevolve(project, "careful", extra=[*eight, "-p", "skip_careful"])
    result.assert_outcomes(passed=4, failed=8, skipped=12)
    assert result.ret == 12  # the skipped rollouts are missing, so the session is incomplete
    calls = _tags_called(projects, project)
    assert sum(line.endswith(" careful") for line in calls) == 12  # each was started ahead...
    assert {key[2] for key in projects.rollout_records(project)} == {"seed"}  # ...none persisted
    resumed = capevolve(project, "careful", extra=eight)
    assert resumed.ret == 0
    resumed.stdout.fnmatch_lines(["rollouts: 12 paid, 12 reused*"])


def _tags_called(projects, project) -> list[str]:
    """observed/calls.log's lines, "TASK FOLDER" made "TASK TAG"."""
    tags = projects.tags_by_folder(project)
    lines = (project / "observed" / "calls.log").read_text().splitlines()
    return [f"{task} {tags[folder]}" for task, folder in (line.split() for line in lines)]


MARK_CAREFUL = """
import pytest


def pytest_collection_modifyitems(items):
    for n, item in enumerate(items):
        if "careful" in item.name:
            mark = pytest.mark.skip("not today") if n % 2 else pytest.mark.skipif(True, reason="nor today")
            item.add_marker(mark)
"""


def test_a_rollout_item_with_a_skip_mark_is_never_started_ahead(
    pytester, example, projects, capevolve
) -> None:
    """A mark tells before the item's turn that pytest may skip it: nothing is paid for it (a
    conftest that skips in its own setup hook cannot be told apart: see the test above)."""
    project = example("toy_calc")
    projects.add_adapter(project, LOGGING, "adapter.py:LoggingAdapter")
    projects.writable(project, "observed")  # where run_target notes its calls
    pytester.makepyfile(mark_careful=MARK_CAREFUL)
    pytester.syspathinsert()
    result = capevolve(project, "careful", extra=["--capevolve-concurrency", "8", "-p", "mark_careful"])
    result.assert_outcomes(passed=4, failed=8, skipped=12)
    calls = _tags_called(projects, project)
    assert len(calls) == 12 and not any(line.endswith(" careful") for line in calls)


ASYNC_HANGING = """

class AsyncHangingAdapter(ToyCalcAdapter):
    async def run_target(self, task, ctx, *, seed):
        import asyncio

        if "*" in task.input and "multiply carefully" not in (Path(ctx) / "prompt.md").read_text().lower():  # the seed's
            try:  # the first such rollout to get here hangs, the others answer
                os.close(os.open(Path(__file__).parent / "observed" / "hung", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return super().run_target(task, ctx, seed=seed)
            await asyncio.sleep(60)  # only the deadline may end it
        return super().run_target(task, ctx, seed=seed)
"""


def test_an_async_rollout_past_its_deadline_keeps_its_sandbox_childs_label(
    example, projects, capevolve
) -> None:
    """An async adapter's rollout stopped by the scoring process's watchdog ran in its sandbox
    child, as every other: its record carries that child's label, and the session never says
    candidate code ran "in the scoring process" (it said so for every such timeout: a newcomer's
    async agent with a slow candidate read "unconfined … for 38 of 42 rollouts")."""
    project = example("toy_calc")
    projects.add_adapter(project, "import os\n" + ASYNC_HANGING, "adapter.py:AsyncHangingAdapter")
    projects.writable(project, "observed")  # where run_target marks the one rollout that hangs
    with (project / "capevolve.yaml").open("a") as spec:
        spec.write("rollout_timeout_s: 5\n")  # the others answer inside it at any load
    result = capevolve(project)
    assert result.ret == 0, result.stdout.str()
    records = projects.rollout_records(project)
    hung = [r for r in records.values() if r["feedback"].startswith("candidate failure: timeout")]
    assert len(hung) == 1, hung
    labels = {r.get("confinement") for r in records.values()}
    assert len(labels) == 1 and None not in labels, labels  # the hung one's is the others'
    assert "ran in the scoring process" not in result.stdout.str()
