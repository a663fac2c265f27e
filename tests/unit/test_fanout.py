"""Rollouts in flight within one process: ``--capevolve-concurrency K``.

The adapters below prove concurrency with barriers, not clocks: K calls can only pass a
barrier of K parties if K are in flight at once, and each call logs how many were in flight
when it arrived, so the log's maximum is the most that ever ran together.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from pytest_capevolve import Rollout, Task
from pytest_capevolve._engine.inflight import RolloutPool
from pytest_capevolve._engine.runner import AdapterRunner

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
            with open(Path(__file__).with_name("in_flight.log"), "a") as log:
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
        with open(Path(__file__).with_name("in_flight.log"), "a") as log:
            log.write(f"{cls._now} {_threading.get_ident()}\\n")
        try:
            await _asyncio.wait_for(cls._barrier.wait(), 60)
        finally:
            cls._now -= 1
        return ToyCalcAdapter.run_target(self, task, ctx, seed=seed)
'''


def in_flight_log(project: Path) -> list[tuple[int, int]]:
    lines = (project / "in_flight.log").read_text().split("\n")
    return [(int(now), int(thread)) for now, thread in (line.split() for line in lines if line)]


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


# -- the deadline off the main thread ----------------------------------------------------------


class Retrying:
    """A sync agent that retries whatever it catches, for up to 5 s; ``left`` is set when its
    retry loop is left, by giving up or by an exception it does not catch."""

    def __init__(self, catch: type[BaseException]) -> None:
        self.catch = catch
        self.threads: list[threading.Thread] = []
        self.left = threading.Event()

    def tasks(self, split):
        return []

    def run_target(self, task, ctx, *, seed):
        self.threads.append(threading.current_thread())
        give_up = time.monotonic() + 5.0
        try:
            while time.monotonic() < give_up:
                try:
                    time.sleep(0.01)
                except self.catch:
                    continue  # "retry"
        finally:
            self.left.set()
        return Rollout(output="late")

    def score(self, task, rollout):
        return 1.0


class AsyncRetrying(Retrying):
    async def run_target(self, task, ctx, *, seed):
        self.threads.append(threading.current_thread())
        give_up = time.monotonic() + 5.0
        try:
            while time.monotonic() < give_up:
                try:
                    await asyncio.sleep(0.01)
                except self.catch:
                    continue
        finally:
            self.left.set()
        return Rollout(output="late")


@pytest.mark.parametrize("agent", [Retrying, AsyncRetrying])
@pytest.mark.parametrize("catch", [Exception, BaseException])
def test_the_deadline_holds_off_the_main_thread_whatever_the_adapter_catches(
    tmp_path: Path, agent: type[Retrying], catch: type[BaseException]
) -> None:
    adapter = agent(catch)
    pool = RolloutPool(AdapterRunner(adapter))
    try:
        future = pool.start(Task(id="t"), tmp_path, seed=0, split="val", timeout_s=0.2)
        scored = future.result(timeout=4.0)  # before the agent's own 5 s are up
        assert not adapter.left.is_set() or catch is Exception  # reported, whatever it does
        assert scored.reward is None  # missing data, never a 0
        assert scored.infra_error is not None and scored.infra_error.startswith("timeout")
        (thread,) = adapter.threads
        assert thread is not threading.main_thread()
        if catch is Exception:
            # the interruption is a BaseException (RolloutTimeout, or the task's cancellation):
            # an `except Exception:` retry loop is left long before it would give up
            assert adapter.left.wait(timeout=3.0)
    finally:
        pool.close()


HANGING = """

class HangingAdapter(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        import time as _time

        if "*" in task.input and Path(ctx).name == "capability":
            give_up = _time.monotonic() + 5.0
            while _time.monotonic() < give_up:
                try:
                    _time.sleep(0.01)
                except Exception:
                    continue
        return super().run_target(task, ctx, seed=seed)
"""


LOGGING = """

class LoggingAdapter(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        with open(Path(__file__).with_name("calls.log"), "a") as log:
            log.write(f"{task.id} {Path(ctx).name}\\n")
        return super().run_target(task, ctx, seed=seed)
"""

SKIP_CAREFUL = """
import pytest


def pytest_runtest_setup(item):
    if "careful" in item.name:
        pytest.skip("no longer needed (as a sequential gate would decide)")
"""


MARK_CAREFUL = """
import pytest


def pytest_collection_modifyitems(items):
    for n, item in enumerate(items):
        if "careful" in item.name:
            mark = pytest.mark.skip("not today") if n % 2 else pytest.mark.skipif(True, reason="nor today")
            item.add_marker(mark)
"""


class BlockingAsync:
    """An async adapter whose first rollout blocks the event loop (a sync call in async code)."""

    def __init__(self) -> None:
        self.blocking = threading.Event()

    def tasks(self, split):
        return []

    async def run_target(self, task, ctx, *, seed):
        if task.id == "blocker":
            self.blocking.set()
            time.sleep(0.3)  # blocks the loop: what follows is queued behind it
        return Rollout(output=task.id)

    def score(self, task, rollout):
        return 1.0


def test_rollouts_queued_behind_a_blocked_loop_when_the_session_ends_are_abandoned_cleanly(
    tmp_path: Path,
) -> None:
    adapter = BlockingAsync()
    pool = RolloutPool(AdapterRunner(adapter))
    loop_errors: list[dict] = []
    pool._event_loop().set_exception_handler(lambda loop, context: loop_errors.append(context))
    first = pool.start(Task(id="blocker"), tmp_path, seed=0, split="val", timeout_s=None)
    assert adapter.blocking.wait(timeout=5.0)
    queued = [pool.start(Task(id=f"t{i}"), tmp_path, seed=0, split="val", timeout_s=None) for i in range(3)]
    pool.close()  # the session ends while they wait behind the blocked loop
    assert first.result(timeout=5.0).infra_error is None
    for future in queued:  # each settles (no task created on a loop let go of), as abandoned
        scored = future.result(timeout=5.0)
        assert scored.reward is None and scored.infra_error.startswith("abandoned")
    assert loop_errors == []  # no exception in a queued callback
