"""What a rollout in flight prints and logs reaches its own item, as at K = 1.

The adapters below write while other rollouts are in flight: each waits at a barrier of K
parties between its first and last line (K from CAPEVOLVE_TEST_WIDTH), so its lines are
written while the main thread reports or captures other items. Each rollout also takes 50 ms,
so its call report has a duration to show. The sessions evaluate the seed alone: each
candidate's rollouts run in a sandbox child of its own, where the barrier is, so a group of K
must not straddle two candidates (the seed's 12 rollouts are three groups of 4).
"""

from __future__ import annotations

import collections
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from session_outputs import junit_testcases

TALKING = '''

import logging as _logging
import os as _os
import sys as _sys
import threading as _threading
import time as _time


class TalkingAdapter(ToyCalcAdapter):
    """Prints, writes to stderr and logs, with K - 1 other rollouts in flight."""

    _barrier = _threading.Barrier(int(_os.environ["CAPEVOLVE_TEST_WIDTH"]), timeout=60)

    def run_target(self, task, ctx, *, seed):
        print("hello from", task.id)
        TalkingAdapter._barrier.wait()  # passes only when K rollouts are in flight together
        _sys.stderr.write(f"stderr of {task.id}\\n")
        _logging.getLogger("agent").info("log of %s", task.id)
        _time.sleep(0.05)  # the rollout's own time, for its call report
        print("bye from", task.id)
        return super().run_target(task, ctx, seed=seed)
'''

ASYNC_TALKING = '''

import asyncio as _asyncio
import logging as _logging
import os as _os
import sys as _sys


class AsyncTalkingAdapter(ToyCalcAdapter):
    """TalkingAdapter with an async run_target: its rollouts are tasks of one event loop."""

    _barrier = None

    async def run_target(self, task, ctx, *, seed):
        cls = AsyncTalkingAdapter
        if cls._barrier is None:
            cls._barrier = _asyncio.Barrier(int(_os.environ["CAPEVOLVE_TEST_WIDTH"]))
        print("hello from", task.id)
        await _asyncio.wait_for(cls._barrier.wait(), 60)
        _sys.stderr.write(f"stderr of {task.id}\\n")
        _logging.getLogger("agent").info("log of %s", task.id)
        await _asyncio.sleep(0.05)
        print("bye from", task.id)
        return ToyCalcAdapter.run_target(self, task, ctx, seed=seed)
'''

WRITTEN = re.compile(r"(hello from|bye from|stderr of|log of) (q\d\d)")
PROGRESS = re.compile(r"^\S+capevolve\.yaml [.F]+\s+\[\s*\d+%\]$")
FAILED_LINE = re.compile(r"^FAILED \S*capevolve\.yaml::val::(q\d\d)\[\S+\] reward ")
ROLLOUT_S = 0.05
JUNIT = ["-o", "junit_logging=all", "-o", "log_level=INFO"]


def written(text: str | None) -> collections.Counter[tuple[str, str]]:
    return collections.Counter(WRITTEN.findall(text or ""))


def assert_each_testcase_holds_its_own(junit: Path, *, timed: bool = True) -> None:
    """Each testcase's system-out holds its own task's prints and log record, its system-err
    its own stderr line, exactly once and nobody else's; its time is the rollout's."""
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert len(cases) == 12
    for case in cases:
        task = case.get("name", "").split("[")[0]
        out, err = case.find("system-out"), case.find("system-err")
        assert written(None if out is None else out.text) == {
            ("hello from", task): 1,
            ("bye from", task): 1,
            ("log of", task): 1,
        }, (case.get("name"), None if out is None else out.text)
        assert written(None if err is None else err.text) == {("stderr of", task): 1}, case.get("name")
        if timed:
            assert float(case.get("time", "0")) >= ROLLOUT_S, (case.get("name"), case.get("time"))


def assert_terminal_clean(result: pytest.RunResult) -> None:
    """No adapter line among the progress characters, nor on the real stderr; under ``-rA`` a
    failed rollout's line is followed by its own prints."""
    lines = result.stdout.lines
    start = next(n for n, line in enumerate(lines) if line.startswith("collected ")) + 1
    end = next(n for n in range(start + 1, len(lines)) if lines[n].startswith(("=", "-")))
    progress = [line for line in lines[start:end] if line]
    assert progress and all(PROGRESS.match(line) for line in progress), progress
    assert not WRITTEN.search(result.stderr.str())
    failed = [(n, m.group(1)) for n, line in enumerate(lines) if (m := FAILED_LINE.match(line))]
    assert failed
    for n, task in failed:
        assert lines[n + 1 : n + 3] == [lines[n + 1], f"hello from {task}"], lines[n : n + 4]
        assert lines[n + 3] == f"bye from {task}", lines[n : n + 8]
    for n, line in enumerate(lines):  # every adapter line sits in a section of its own task's
        for _kind, task in WRITTEN.findall(line):
            header = next(
                lines[k] for k in range(n, -1, -1) if lines[k].startswith(("FAILED ", "PASSED ", "_"))
            )
            assert f"{task}[" in header, (header, line)


@pytest.mark.parametrize(
    "protocol",
    [[], ["-p", "no:capevolve-protocol"], ["--capture=sys"]],
    ids=["lean", "pytest", "capture-sys"],  # pytest's capture file must stay a CaptureIO
)
def test_a_rollout_in_flight_prints_and_logs_into_its_own_item(
    example, projects, capevolve, monkeypatch, protocol: list[str]
) -> None:
    monkeypatch.setenv("CAPEVOLVE_TEST_WIDTH", "1")
    reference = example("toy_calc", dest="reference")
    projects.add_adapter(reference, TALKING, "adapter.py:TalkingAdapter")
    ref_junit = reference / "junit.xml"
    assert capevolve(reference, extra=[*JUNIT, f"--junitxml={ref_junit}"]).ret == 0

    monkeypatch.setenv("CAPEVOLVE_TEST_WIDTH", "4")
    project = example("toy_calc")
    projects.add_adapter(project, TALKING, "adapter.py:TalkingAdapter")
    junit = project / "junit.xml"
    extra = [*protocol, *JUNIT, f"--junitxml={junit}", "--capevolve-concurrency", "4", "-rA"]
    result = capevolve(project, extra=extra)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4, failed=8)  # every barrier passed: no infra error

    assert_each_testcase_holds_its_own(junit)
    assert junit_testcases(junit, "toy_calc") == junit_testcases(ref_junit, "reference")  # as K = 1
    assert_terminal_clean(result)


@pytest.mark.parametrize("width", [1, 4])
def test_an_async_adapters_rollouts_print_and_log_into_their_own_items(
    example, projects, capevolve, monkeypatch, width: int
) -> None:
    """At K = 1 too: an async adapter's rollouts run on the pool's event loop thread."""
    monkeypatch.setenv("CAPEVOLVE_TEST_WIDTH", str(width))
    project = example("toy_calc")
    projects.add_adapter(project, ASYNC_TALKING, "adapter.py:AsyncTalkingAdapter")
    junit = project / "junit.xml"
    extra = [*JUNIT, f"--junitxml={junit}", "--capevolve-concurrency", str(width), "-rA"]
    result = capevolve(project, extra=extra)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4, failed=8)
    assert_each_testcase_holds_its_own(junit)
    assert_terminal_clean(result)


def test_routed_output_on_xdist_workers(example, projects, capevolve, monkeypatch) -> None:
    """Two workers, each with up to 4 rollouts in flight (no barrier: a worker may own fewer)."""
    monkeypatch.setenv("CAPEVOLVE_TEST_WIDTH", "1")
    project = example("toy_calc")
    projects.add_adapter(project, TALKING, "adapter.py:TalkingAdapter")
    junit = project / "junit.xml"
    extra = ["-n", "2", *JUNIT, f"--junitxml={junit}", "--capevolve-concurrency", "4"]
    result = capevolve(project, extra=extra)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4, failed=8)
    assert_each_testcase_holds_its_own(junit)


# two FIFOs between the session (its conftest) and the rollout (in its sandbox child): opening
# one blocks until the other side opens it, so each side waits for the other without a clock
HANDSHAKE = """
import os
from pathlib import Path

HERE = Path(__file__).parent / "toy_calc" / "observed"  # the project's, named in sandbox_writable
REPORTING = HERE / "reporting.fifo"  # written on the main thread while it logs q00[seed-t0]'s call report
WRITTEN = HERE / "written.fifo"  # written by q00[careful-t0]'s rollout once it has printed
"""

REPORTING_CONFTEST = """
import os

import handshake

os.mkfifo(handshake.REPORTING)
os.mkfifo(handshake.WRITTEN)


def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.endswith("q00[seed-t0]"):
        handshake.REPORTING.write_text("reporting")
        # the rollout writes while no item's capture is on
        assert handshake.WRITTEN.read_text() == "written"
"""

BETWEEN_PHASES = '''

import handshake as _handshake


class BetweenPhasesAdapter(ToyCalcAdapter):
    """q00[careful-t0], started ahead of q00[seed-t0], writes while that item's call report is
    being logged: between two items' phases, when pytest captures nothing."""

    def run_target(self, task, ctx, *, seed):
        if task.id == "q00" and "multiply carefully" in (Path(ctx) / "prompt.md").read_text().lower():
            assert _handshake.REPORTING.read_text() == "reporting"
            print("hello from", task.id)
            _handshake.WRITTEN.write_text("written")
        return super().run_target(task, ctx, seed=seed)
'''


def test_a_write_between_two_items_phases_reaches_its_own_item_not_the_terminal(
    pytester: pytest.Pytester, example, projects, capevolve
) -> None:
    pytester.makepyfile(handshake=HANDSHAKE)
    pytester.makeconftest(REPORTING_CONFTEST)
    pytester.syspathinsert()
    project = example("toy_calc")
    projects.add_adapter(project, BETWEEN_PHASES, "adapter.py:BetweenPhasesAdapter")
    projects.writable(project, "observed")  # where the rollout opens its side of the handshake
    junit = project / "junit.xml"
    extra = ["-o", "junit_logging=all", f"--junitxml={junit}", "--capevolve-concurrency", "2"]
    result = capevolve(project, "careful", extra=extra)
    assert result.ret == 0, result.stdout.str()
    lines = result.stdout.lines
    start = next(n for n, line in enumerate(lines) if line.startswith("collected ")) + 1
    end = next(n for n in range(start + 1, len(lines)) if lines[n].startswith(("=", "-")))
    progress = [line for line in lines[start:end] if line]
    assert len(progress) == 1 and PROGRESS.match(progress[0]), progress
    outs = {
        case.get("name"): written(getattr(case.find("system-out"), "text", None))
        for case in ET.parse(junit).getroot().iter("testcase")
    }
    assert outs.pop("q00[careful-t0]") == {("hello from", "q00"): 1}
    assert not any(outs.values())
