"""Rollouts in flight: one process's rollouts running at once, each with its own deadline.

Used at ``--capevolve-concurrency K`` > 1 or with an async adapter, in the process that runs
items and in each sandbox child: sync rollouts on reused daemon threads, async ones as tasks of
one event loop. A SIGALRM timer cannot keep a deadline off the main thread, so a watchdog thread
does: at the deadline the rollout's future gets its timeout whatever the adapter does, and the
abandoned rollout is interrupted again every :data:`TICK_S` until it ends, so an ``except
Exception:`` retry loop neither swallows the timeout nor runs for ever. What each rollout prints
and logs is kept for its item (:data:`.rollout_output.CURRENT`)."""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import ctypes
import functools
import heapq
import itertools
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any

from .._project.adapter import Task
from .rollout_output import CURRENT, RolloutOutput
from .runner import AdapterRunner, RolloutTimeout, Scored, run_and_score, run_and_score_async, timeout_message

TICK_S = 0.05  # how often an abandoned rollout is interrupted again, as the SIGALRM timer re-arms


class InflightRollout:
    """One started rollout: its future, its deadline, and how to interrupt it."""

    def __init__(self, timeout_s: float | None) -> None:
        self.future: Future[Scored] = Future()
        self.timeout_s = timeout_s
        self.started = time.monotonic()
        self.thread_id: int | None = None  # sync: the thread running it
        self.task: asyncio.Task[Scored] | None = None  # async: its task on the loop
        self.loop: asyncio.AbstractEventLoop | None = None
        self.running = True  # the adapter's code may still be running (cleared by its thread)
        self.gate = threading.Lock()  # orders the watchdog's raise against the thread's exit
        self.output = RolloutOutput()
        # the label of the sandbox child running it, asked when the watchdog stops it (None:
        # not isolated): a rollout stopped here still ran its candidate code in that child
        self.label: Callable[[], str | None] = lambda: None

    def settle(self, scored: Scored) -> None:
        """The first answer wins: the rollout's own, or the watchdog's timeout."""
        self.output.end()
        scored.captured = self.output
        with contextlib.suppress(InvalidStateError):
            self.future.set_result(scored)

    def expire(self) -> None:
        seconds = round(time.monotonic() - self.started, 6)
        expired = Scored(rollout=None, infra_error=timeout_message(self.timeout_s), seconds=seconds)
        expired.confinement = self.label()
        self.settle(expired)

    def interrupt(self) -> None:
        if self.task is not None and self.loop is not None:
            self.loop.call_soon_threadsafe(self.task.cancel)
            return
        with self.gate:  # never raise into a thread that has left the adapter's code
            if self.thread_id is not None and self.running:
                _raise_in_thread(self.thread_id, RolloutTimeout)


def _raise_in_thread(thread_id: int, exc: type[BaseException]) -> None:
    """Raise ``exc`` in another thread when it next runs a line of Python. Never called with NULL
    to clear one: that sets the pending flag with no exception, slowing every thread for good."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


def _tick() -> None:
    """A Python call: where a pending asynchronous exception is raised."""


def run_rollout_here(rollout: InflightRollout, call: Callable[[], Scored]) -> None:
    """Run one sync rollout in the calling (rollout) thread and settle its future. Raises
    nothing, and leaves no RolloutTimeout pending, so the thread may take the next rollout."""
    rollout.thread_id = threading.get_ident()
    scored: Scored | None = None
    routed = CURRENT.set(rollout.output)
    try:
        try:
            rollout.output.begin()
            scored = call()
        finally:
            rollout.running = False
            with rollout.gate:  # the watchdog is not between its check and its raise
                pass
        for _ in range(3):
            _tick()  # a RolloutTimeout raised just before fires here, not in the next rollout
    except BaseException as exc:
        # a RolloutTimeout outside run_target: the watchdog settled it; anything else (a
        # BaseException the call let through) settles the rollout as an infra error, so the
        # item collecting it never waits for ever
        if scored is None and not isinstance(exc, RolloutTimeout):
            scored = Scored(rollout=None, infra_error=f"run_target raised {type(exc).__name__}: {exc}")
    CURRENT.reset(routed)  # past any interruption: the thread's next rollout starts unrouted
    if scored is not None:
        rollout.settle(scored)


class RolloutThreads:
    """Daemon threads for sync rollouts, reused: a thread is started only when none is idle (an
    abandoned rollout keeps its own, and never holds the process open). ``_thread`` rather than
    ``threading.Thread.start``, which waits for the new thread to take the GIL: up to 5 ms each,
    a third of a second on the main thread for 64 rollouts started at once."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[InflightRollout, Callable[[], Scored]] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job that no submitted job has claimed yet
        self._threads = 0

    def submit(self, rollout: InflightRollout, call: Callable[[], Scored]) -> None:
        with self._lock:
            spawn = self._idle == 0
            if spawn:
                self._threads += 1
            else:
                self._idle -= 1
        self._jobs.put((rollout, call))
        if spawn:
            _thread.start_new_thread(self._work, ())

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            run_rollout_here(*job)
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """Let every thread end once it is idle (an abandoned one, when its rollout ends)."""
        with self._lock:
            count, self._threads, self._idle = self._threads, 0, 0
        for _ in range(count):
            self._jobs.put(None)


class Watchdog:
    """One daemon thread keeping every in-flight rollout's deadline."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, InflightRollout]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def watch(self, rollout: InflightRollout) -> None:
        if rollout.timeout_s is None:
            return
        self._push(rollout.started + rollout.timeout_s, rollout)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="capevolve-watchdog", daemon=True)
            self._thread.start()

    def _push(self, when: float, rollout: InflightRollout) -> None:
        with self._wake:
            sooner = not self._due or when < self._due[0][0]
            heapq.heappush(self._due, (when, next(self._order), rollout))
            if sooner:  # else the watchdog already wakes in time: no thread handoff per rollout
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and (not self._due or self._due[0][0] > time.monotonic()):
                    self._wake.wait(None if not self._due else self._due[0][0] - time.monotonic())
                if self._closed:
                    return
                _, _, rollout = heapq.heappop(self._due)
            alive = not rollout.task.done() if rollout.task is not None else rollout.running
            if not alive and rollout.future.done():
                continue
            rollout.expire()
            rollout.interrupt()
            self._push(time.monotonic() + TICK_S, rollout)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()


class RolloutPool:
    """Starts rollouts off the calling thread; the caller bounds how many run at once. In a
    sandbox child ``run``/``run_async`` run the candidate's side only: the parent scores."""

    def __init__(
        self,
        runner: AdapterRunner,
        *,
        run: Callable[..., Scored] = run_and_score,
        run_async: Callable[..., Coroutine[Any, Any, Scored]] = run_and_score_async,
    ) -> None:
        self.runner = runner
        self._run = run
        self._run_async = run_async
        self.watchdog = Watchdog()
        self.threads = RolloutThreads()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._feeding = threading.Lock()
        self._queued: list[tuple[InflightRollout, Coroutine[Any, Any, Scored]]] = []
        self._woken = False  # a _create_tasks call is on its way to the loop
        self._closed = False

    def start(
        self, task: Task, candidate_dir: Path, *, seed: int, split: str, timeout_s: float | None
    ) -> Future[Scored]:
        rollout = InflightRollout(timeout_s)
        if (label_of := getattr(self.runner.targets, "label_of", None)) is not None:
            rollout.label = functools.partial(label_of, candidate_dir)
        asked = {"seed": seed, "split": split, "timeout_s": timeout_s}
        if self.runner.on_loop:
            # the coroutine calls run_and_score_async only once it runs: one closed unstarted (a
            # session ending) leaves no inner coroutine never awaited
            call = functools.partial(self._run_async, self.runner, task, candidate_dir, **asked)
            self._feed(self._event_loop(), rollout, _routed(rollout.output, call))
        else:
            self.threads.submit(
                rollout, functools.partial(self._run, self.runner, task, candidate_dir, **asked)
            )
        self.watchdog.watch(rollout)
        return rollout.future

    def _feed(
        self, loop: asyncio.AbstractEventLoop, rollout: InflightRollout, coro: Coroutine[Any, Any, Scored]
    ) -> None:
        """Queue a rollout for the loop, waking it only if no wake-up is on its way: a wake-up
        lets go of the GIL, and under CPU contention one per rollout stalled the starting thread."""
        with self._feeding:
            self._queued.append((rollout, coro))
            if self._woken:
                return
            self._woken = True
        loop.call_soon_threadsafe(self._create_tasks, loop)

    def _create_tasks(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop's thread: a task for every rollout queued since the last wake-up. The loop
        comes with the call: one queued behind a blocking adapter may run after :meth:`close` — then
        each coroutine is closed unstarted (no task nobody collects, no "never awaited" warning)."""
        with self._feeding:
            batch, self._queued = self._queued, []
            self._woken = False
        for rollout, coroutine in batch:
            if self._closed:
                coroutine.close()
                abandoned = Scored(rollout=None, infra_error="abandoned: the session ended before it started")
                rollout.settle(abandoned)
                continue
            rollout.loop = loop
            rollout.task = loop.create_task(coroutine)
            rollout.task.add_done_callback(functools.partial(_task_settled, rollout))

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=loop.run_forever, name="capevolve-event-loop", daemon=True
            )
            self._loop = loop
            self._loop_thread.start()
        return self._loop

    def close(self) -> None:
        """At the end of the session: abandon what is still running (its item never ran)."""
        self._closed = True
        self.watchdog.close()
        self.threads.close()
        loop, self._loop = self._loop, None
        if loop is None or self._loop_thread is None:
            return
        try:
            still_running = asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout=5.0)
        except Exception:  # the loop is stuck in a blocking call: leave it be
            return
        if still_running:
            # a task that swallows its cancellation: closing its loop would destroy it mid-run
            # (GeneratorExit inside the adapter); the daemon loop lets it end on its own
            return
        loop.call_soon_threadsafe(loop.stop)
        self._loop_thread.join(timeout=2.0)
        if not self._loop_thread.is_alive():
            loop.close()


async def _routed(output: RolloutOutput, rollout: Callable[[], Coroutine[Any, Any, Scored]]) -> Scored:
    """The ``rollout()`` coroutine with its writes and records routed to ``output``: a task runs
    in a copy of the context, so setting the variable here routes this task alone."""
    CURRENT.set(output)
    output.begin()
    return await rollout()


def _task_settled(rollout: InflightRollout, task: asyncio.Task[Scored]) -> None:
    if task.cancelled():
        rollout.settle(Scored(rollout=None, infra_error=timeout_message(rollout.timeout_s)))
    elif (exc := task.exception()) is not None:
        rollout.settle(Scored(rollout=None, infra_error=f"run_target raised {type(exc).__name__}: {exc}"))
    else:
        rollout.settle(task.result())


async def _cancel_all() -> int:
    """Cancel every task on the loop; how many are still running a second later."""
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    if not tasks:
        return 0
    _, pending = await asyncio.wait(tasks, timeout=1.0)
    return len(pending)
