"""What a rollout in flight prints and logs reaches its own item, as at K = 1.

The adapters below write while other rollouts are in flight: each waits at a barrier of K
parties between its first and last line (K from CAPEVOLVE_TEST_WIDTH), so its lines are
written while the main thread reports or captures other items. Each rollout also takes 50 ms,
so its call report has a duration to show.
"""

from __future__ import annotations

import collections
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

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
FAILED_LINE = re.compile(r"^FAILED val::(q\d\d)\[\S+\] reward ")
ROLLOUT_S = 0.05
JUNIT = ["-o", "junit_logging=all", "-o", "log_level=INFO"]


def written(text: str | None) -> collections.Counter[tuple[str, str]]:
    return collections.Counter(WRITTEN.findall(text or ""))


def assert_each_testcase_holds_its_own(junit: Path, *, timed: bool = True) -> None:
    """Each testcase's system-out holds its own task's prints and log record, its system-err
    its own stderr line, exactly once and nobody else's; its time is the rollout's."""
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert len(cases) == 24
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


def test_a_routed_stream_keeps_each_rollouts_writes_and_passes_on_the_rest() -> None:
    """The pieces on their own: a write where no rollout is current reaches the wrapped stream;
    one made in a rollout's context (its thread, or a context copied from it) reaches only that
    rollout's buffer; a log record is kept once however many filtered handlers it reaches."""
    import contextvars
    import io
    import logging
    import threading

    from pytest_capevolve._engine.rollout_output import (
        CURRENT,
        RolloutLogFilter,
        RolloutOutput,
        RoutedStream,
    )

    wrapped = io.StringIO()
    stream = RoutedStream(wrapped, "stdout")
    outputs = {name: RolloutOutput() for name in ("a", "b")}
    log_filter = RolloutLogFilter()
    record = logging.LogRecord("agent", logging.INFO, __file__, 1, "log of %s", ("a",), None)

    def rollout(name: str) -> None:
        CURRENT.set(outputs[name])
        print("hello from", name, file=stream)
        if name == "a":  # the same record at two handlers' filters: kept once, handled by neither
            assert not log_filter.filter(record) and not log_filter.filter(record)
        contextvars.copy_context().run(lambda: stream.write(f"copied {name}\n"))

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(rollout, n)) for n in outputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("main", file=stream)
    assert log_filter.filter(record)  # no rollout current: handled as it comes
    assert wrapped.getvalue() == "main\n"
    assert stream.getvalue() == "main\n"  # the rest is the wrapped stream's
    for name, output in outputs.items():
        assert "".join(output.stdout) == f"hello from {name}\ncopied {name}\n"
    assert outputs["a"].records == [record] and outputs["b"].records == []


HANDSHAKE = """
import threading

reporting = threading.Event()  # set on the main thread while it logs q00[seed-t0]'s call report
written = threading.Event()  # set by q00[careful-t0]'s rollout once it has written
"""

REPORTING_CONFTEST = """
import handshake


def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.endswith("q00[seed-t0]"):
        handshake.reporting.set()
        assert handshake.written.wait(60)  # the rollout writes while no item's capture is on
"""

BETWEEN_PHASES = '''

import handshake as _handshake


class BetweenPhasesAdapter(ToyCalcAdapter):
    """q00[careful-t0], started ahead of q00[seed-t0], writes while that item's call report is
    being logged: between two items' phases, when pytest captures nothing."""

    def run_target(self, task, ctx, *, seed):
        if task.id == "q00" and Path(ctx).name == "careful":
            assert _handshake.reporting.wait(60)
            print("hello from", task.id)
            _handshake.written.set()
        return super().run_target(task, ctx, seed=seed)
'''


def test_a_stream_routed_in_place_stays_what_it_was() -> None:
    """pytest's capture file is routed as the same object, still a CaptureIO (pytest asserts it);
    the interpreter's own stream class cannot be, and is wrapped instead; unroute undoes it."""
    import io

    from _pytest.capture import CaptureIO

    from pytest_capevolve._engine.rollout_output import (
        CURRENT,
        RolloutOutput,
        route_in_place,
        unroute,
    )

    capture = CaptureIO()
    assert route_in_place(capture, "stderr")
    assert isinstance(capture, CaptureIO) and not route_in_place(capture, "stderr")  # once
    output = RolloutOutput()
    token = CURRENT.set(output)
    try:
        print("in flight", file=capture)
    finally:
        CURRENT.reset(token)
    print("main", file=capture)
    assert capture.getvalue() == "main\n" and "".join(output.stderr) == "in flight\n"
    unroute(capture)
    assert type(capture) is CaptureIO
    assert not route_in_place(io.TextIOWrapper(io.BytesIO()), "stdout")  # a built-in class
