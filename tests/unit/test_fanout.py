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
from pytest_capevolve._engine.inflight import InflightRollout, RolloutPool
from pytest_capevolve._engine.runner import AdapterRunner, Scored
from pytest_capevolve._engine.sandbox import isolated

# -- the deadline off the main thread ----------------------------------------------------------


class Retrying:
    """A sync agent that retries whatever it catches until the test lets it go (``stop``; 60 s at
    most); ``entered`` is set once it is in its retry loop; ``left`` is set when that loop is
    left, by an exception it does not catch or by being let go — so the test needs no clock to
    tell the deadline from the agent's own end. ``reported``: set by the test when the rollout's
    future is settled."""

    def __init__(self, catch: type[BaseException]) -> None:
        self.catch = catch
        self.threads: list[threading.Thread] = []
        self.entered = threading.Event()
        self.reported = threading.Event()
        self.left = threading.Event()
        self.stop = threading.Event()

    def tasks(self, split):
        return []

    def run_target(self, task, ctx, *, seed):
        self.threads.append(threading.current_thread())
        give_up = time.monotonic() + 60.0
        try:
            while not self.stop.is_set() and time.monotonic() < give_up:
                try:
                    self.entered.set()
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
        give_up = time.monotonic() + 60.0
        try:
            self.entered.set()
            # blocks the loop (no await) until the watchdog has reported the rollout: the runner's
            # own deadline, a timer on this loop, cannot report it first
            self.reported.wait(timeout=60)
            while not self.stop.is_set() and time.monotonic() < give_up:
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
    tmp_path: Path, agent: type[Retrying], catch: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = agent(catch)
    pool = RolloutPool(AdapterRunner(adapter))
    watch = pool.watchdog.watch

    def armed_once_running(rollout: InflightRollout) -> None:
        # the deadline (still counted from the call) is kept once the agent is in its retry
        # loop: on a loaded machine its thread or task may start past it, and a task cancelled
        # before its first line never enters the loop this test is about
        assert adapter.entered.wait(timeout=30)
        rollout.future.add_done_callback(lambda _: adapter.reported.set())
        watch(rollout)

    monkeypatch.setattr(pool.watchdog, "watch", armed_once_running)
    try:
        future = pool.start(Task(id="t"), tmp_path, seed=0, split="val", timeout_s=0.2)
        scored = future.result(timeout=30)  # the agent retries until let go: only the deadline ends it
        assert not adapter.left.is_set() or catch is Exception  # reported, whatever it does
        assert scored.reward is None  # missing data, never a 0
        assert scored.infra_error is not None and scored.infra_error.startswith("timeout")
        (thread,) = adapter.threads
        assert thread is not threading.main_thread()
        if catch is Exception:
            # the interruption is a BaseException (RolloutTimeout, or the task's cancellation):
            # an `except Exception:` retry loop is left long before it would give up
            assert adapter.left.wait(timeout=30)
    finally:
        adapter.stop.set()
        pool.close()


class BlockingAsync:
    """An async adapter whose first rollout blocks the event loop (a sync call in async code)
    until the session ends (``pool`` closing; 60 s at most), whatever the machine's load."""

    def __init__(self) -> None:
        self.blocking = threading.Event()
        self.pool: RolloutPool | None = None

    def tasks(self, split):
        return []

    async def run_target(self, task, ctx, *, seed):
        if task.id == "blocker":
            self.blocking.set()
            give_up = time.monotonic() + 60.0
            # blocks the loop (a condition polled, no await): what follows is queued behind it
            while not (self.pool is not None and self.pool._closed) and time.monotonic() < give_up:
                time.sleep(0.005)
        return Rollout(output=task.id)

    def score(self, task, rollout):
        return 1.0


def test_rollouts_queued_behind_a_blocked_loop_when_the_session_ends_are_abandoned_cleanly(
    tmp_path: Path,
) -> None:
    adapter = BlockingAsync()
    pool = RolloutPool(AdapterRunner(adapter))
    adapter.pool = pool
    loop_errors: list[dict] = []
    pool._event_loop().set_exception_handler(lambda loop, context: loop_errors.append(context))
    first = pool.start(Task(id="blocker"), tmp_path, seed=0, split="val", timeout_s=None)
    assert adapter.blocking.wait(timeout=30)
    queued = [pool.start(Task(id=f"t{i}"), tmp_path, seed=0, split="val", timeout_s=None) for i in range(3)]
    pool.close()  # the session ends while they wait behind the blocked loop
    assert first.result(timeout=30).infra_error is None
    for future in queued:  # each settles (no task created on a loop let go of), as abandoned
        scored = future.result(timeout=30)
        assert scored.reward is None and scored.infra_error.startswith("abandoned")
    assert loop_errors == []  # no exception in a queued callback


class HeldAsync:
    """An async adapter whose rollout "blocker" holds the event loop (a sync wait in async
    code) until the test lets it go."""

    def __init__(self) -> None:
        self.blocking = threading.Event()
        self.release = threading.Event()

    def tasks(self, split):
        return []

    async def run_target(self, task, ctx, *, seed):
        if task.id == "blocker":
            self.blocking.set()
            self.release.wait(timeout=60)
        return Rollout(output=task.id)

    def score(self, task, rollout):
        return 1.0


def test_rollouts_started_while_the_loop_is_busy_wake_it_once(tmp_path: Path) -> None:
    """Each wake-up of the loop lets go of the starting thread's GIL (issue 40, item 5): the
    rollouts started before the loop runs again reach it as one batch, and each still runs."""
    adapter = HeldAsync()
    pool = RolloutPool(AdapterRunner(adapter))
    try:
        first = pool.start(Task(id="blocker"), tmp_path, seed=0, split="val", timeout_s=None)
        assert adapter.blocking.wait(timeout=30)
        loop = pool._event_loop()
        wakes: list[object] = []
        wake = loop.call_soon_threadsafe

        def counted(*args, **kwargs):
            wakes.append(args[0])
            return wake(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        queued = [
            pool.start(Task(id=f"t{i}"), tmp_path, seed=0, split="val", timeout_s=None) for i in range(20)
        ]
        adapter.release.set()
        assert [f.result(timeout=30).rollout.output for f in queued] == [f"t{i}" for i in range(20)]
        assert first.result(timeout=30).infra_error is None
        assert len(wakes) == 1
    finally:
        adapter.release.set()
        pool.close()


class SleepingAsync:
    """An async agent whose scorer is plain (``async_score``: an async one)."""

    def __init__(self, async_score: bool = False) -> None:
        if async_score:
            self.score = self._score_async  # type: ignore[method-assign]

    def tasks(self, split):
        return []

    async def run_target(self, task, ctx, *, seed):
        await asyncio.sleep(0)
        return Rollout(output=task.id)

    def score(self, task, rollout):
        return 1.0

    async def _score_async(self, task, rollout):
        return 1.0


class ChildSide:
    """Stands in for the sandbox children (:class:`Sandboxes`): answers each rollout from this
    process, noting the thread that waited for it."""

    def __init__(self) -> None:
        self.waited_on: list[threading.Thread] = []

    def run(self, task, folder, *, seed, split, timeout_s):
        self.waited_on.append(threading.current_thread())
        return Scored(rollout=Rollout(output=task.id))

    async def run_async(self, task, folder, **asked):
        return self.run(task, folder, **asked)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("async_score", [False, True])
def test_an_isolated_async_adapter_waits_for_its_child_on_a_thread(tmp_path: Path, async_score: bool) -> None:
    """Issue 40, item 5: an async ``run_target`` in a sandbox child runs on the child's loop; the
    scoring process only waits and scores, on a rollout thread as for a sync adapter, with no loop
    of its own to wake per answer (1.33-1.43x a sync adapter's wall under 4 busy processes) — but
    an async scorer still gets one. Its requests never go inline: the child runs them in flight."""
    adapter = SleepingAsync(async_score)
    assert isolated(adapter, "adapter.py:SleepingAsync", tmp_path).targets.inline is False
    assert isolated(Retrying(Exception), "adapter.py:Retrying", tmp_path).targets.inline is True
    runner = AdapterRunner(adapter)
    assert runner.on_loop  # run here (a sandbox child's runner): on its loop
    runner.targets = child = ChildSide()  # type: ignore[assignment]
    pool = RolloutPool(runner)
    try:
        futures = [
            pool.start(Task(id=f"t{i}"), tmp_path, seed=0, split="val", timeout_s=None) for i in range(3)
        ]
        assert [f.result(timeout=30).reward for f in futures] == [1.0, 1.0, 1.0]
        assert (pool._loop is not None) is async_score
        assert len(child.waited_on) == 3
        assert all(t is not threading.main_thread() for t in child.waited_on)
    finally:
        pool.close()
