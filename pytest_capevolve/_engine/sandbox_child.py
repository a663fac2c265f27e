"""The sandbox child: the only process where a candidate's code runs in a session.

It confines itself to the boundary its parent computed (:class:`.sandbox.Fence`), says so in
its ``ready`` frame, imports the adapter, then answers requests on its pipe (:mod:`.wire`) with
the rollout as data and what it printed and logged; it never scores. An ``inline`` request runs
on the main thread under the SIGALRM deadline, the others in flight, so every rollout is answered
by its deadline. Anything a rollout raises is its infra error: only the end of the pipe or the
candidate killing it ends the child. fd 1 points at stderr, so ``os.write(1, ...)`` by candidate
code cannot forge a frame by accident; SIGINT is ignored (the parent's Ctrl-C ends it)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import logging
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._confine.launch import confined
from .._project.adapter import Rollout, Task, load_adapter, load_tasks
from .rollout_output import CURRENT, RolloutOutput, RoutedStream
from .runner import (
    AdapterRunner,
    RolloutTimeout,
    Scored,
    keep_alarm_handler,
    run_target_here,
    run_target_here_async,
)
from .wire import SAME_TASK, FrameReader, ValueLoader, dumps, frame, plain, write_all, write_frame

if TYPE_CHECKING:  # imported when a rollout first runs in flight: a child at concurrency 1 never does
    from .inflight import RolloutPool


class _KeepRecords(logging.Handler):
    """On the root logger: a record logged during a rollout is kept for its answer."""

    def emit(self, record: logging.LogRecord) -> None:
        output = CURRENT.get()
        if output is not None:
            output.records.append(record)


def _record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """A log record as plain fields, for ``logging.makeLogRecord`` in the parent."""
    fields = dict(record.__dict__)
    fields["msg"] = record.getMessage()
    fields["args"] = None
    if record.exc_info:
        fields["exc_text"] = record.exc_text or logging.Formatter().formatException(record.exc_info)
    fields["exc_info"] = None
    return {str(k): plain(v) for k, v in fields.items()}


class Child:
    def __init__(self, proto_in: int, proto_out: int) -> None:
        self.reader = FrameReader(proto_in)
        self.proto_out = proto_out
        self.sending = threading.Lock()
        self.runner: AdapterRunner | None = None
        self.pool: RolloutPool | None = None
        self.values = ValueLoader(())
        self.ref = ""
        self.project_dir = Path()
        self._tasks: dict[str, Task] | None = None
        self._sent_tasks: dict[str, Task] = {}  # the parent sends a task's pickle once
        self._dirs: dict[str, Path] = {}

    def send(self, message: dict[str, Any]) -> None:
        data = frame(message)
        with self.sending:
            write_all(self.proto_out, data)

    def start(self, init: dict[str, Any]) -> None:
        sys.path[:] = init["sys_path"]
        self.ref, self.project_dir = init["ref"], Path(init["project_dir"])
        # before the adapter loads, so before any byte of a candidate (live() and run_target
        # import it) runs: the boundary holds for this process and all it starts, for good
        confinement = confined(init.get("boundary"))
        try:
            # this process starts no sandbox of its own: it need not note the start-up hooks
            adapter = load_adapter(self.ref, self.project_dir, note_startup_hooks=False)
        except BaseException as exc:
            self.send({"fatal": f"the sandbox could not load the adapter: {type(exc).__name__}: {exc}"})
            os._exit(0)
        self.runner = AdapterRunner(adapter)
        self.values = ValueLoader([type(adapter).__module__])
        self.send({"ready": os.getpid(), "confinement": confinement.as_json()})

    def task(self, task_id: str, sent: bytes | int | None) -> Task:
        if sent == SAME_TASK and task_id in self._sent_tasks:
            return self._sent_tasks[task_id]
        if isinstance(sent, bytes):
            with contextlib.suppress(Exception):
                task = pickle.loads(sent)
                if isinstance(task, Task):
                    self._sent_tasks[task_id] = task
                    return task
        if self._tasks is None:  # the parent's task could not travel: the same one from here
            assert self.runner is not None
            try:
                self._tasks = load_tasks(self.runner.adapter, self.ref)
            except Exception as exc:
                raise RuntimeError(
                    f"task {task_id!r} does not pickle, so the sandbox asked the adapter's tasks('all') "
                    f"for it, which failed inside the boundary candidate code runs in ({exc}); give the "
                    "task plain, picklable fields so it reaches the sandbox as data"
                ) from None
        return self._tasks[task_id]

    def folder(self, path: str) -> Path:
        return self._dirs.get(path) or self._dirs.setdefault(path, Path(path))

    def serve(self) -> None:
        while (payload := self.reader.read()) is not None:
            request = pickle.loads(payload)
            level = request[7]
            if logging.root.level != level:
                logging.root.setLevel(level)
            if request[8]:  # inline
                output = RolloutOutput()
                token = CURRENT.set(output)
                try:
                    scored = _guarded(self.run_inline, request)
                finally:
                    CURRENT.reset(token)
                scored.captured = output
                self.answer(request[0], scored)
            else:
                self.start_in_flight(request).add_done_callback(functools.partial(self.answered, request[0]))

    def run_inline(self, request: tuple[Any, ...]) -> Scored:
        assert self.runner is not None
        _, task_id, sent, folder, seed, split, timeout_s, _, _ = request
        task, where = self.task(task_id, sent), self.folder(folder)
        return run_target_here(self.runner, task, where, seed=seed, split=split, timeout_s=timeout_s)

    def start_in_flight(self, request: tuple[Any, ...]) -> Future[Scored]:
        assert self.runner is not None
        if self.pool is None:
            from .inflight import RolloutPool

            self.pool = RolloutPool(
                self.runner, run=functools.partial(_guarded, run_target_here), run_async=_guarded_run_async
            )
        _, task_id, sent, folder, seed, split, timeout_s, _, _ = request
        try:
            task = self.task(task_id, sent)
        except BaseException as exc:
            failed: Future[Scored] = Future()
            failed.set_result(Scored(rollout=None, infra_error=f"sandbox: no task: {exc!r}"))
            return failed
        return self.pool.start(task, self.folder(folder), seed=seed, split=split, timeout_s=timeout_s)

    def answered(self, request_id: int, done: Future[Scored]) -> None:
        self.answer(request_id, done.result())

    def answer(self, request_id: int, scored: Scored) -> None:
        """One frame: the answer's fields (:data:`.wire.ANSWER_FIELDS`), then the rollout's pickle if any."""
        output = scored.captured
        infra_error = scored.infra_error
        stdout = "".join(output.stdout) if output else ""
        stderr = "".join(output.stderr) if output else ""
        blob = b""
        try:
            records = [_record_fields(r) for r in output.records] if output else []
            if scored.rollout is not None:
                try:
                    blob = self.as_data(scored.rollout)
                except Exception as exc:
                    infra_error = f"run_target returned a rollout that is not data: {exc!r}"
            head = dumps((request_id, infra_error, stdout, stderr, records, bool(blob)))
        except Exception as exc:  # an answer that does not pickle (a log field, say): say so
            blob = b""
            head = dumps((request_id, f"sandbox: {exc!r}", "", "", [], False))
        with self.sending:
            write_frame(self.proto_out, head, blob)

    def as_data(self, rollout: Rollout) -> bytes:
        """The rollout's pickle, if the parent will rebuild it as it is (plain values, or classes
        of the adapter's module: loaded here first the way the parent will); else the JSON form
        the record keeps (a candidate's own classes cannot travel: rebuilding them runs its code)."""
        try:
            watch = _PlainWatch(buffer := io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL)
            watch.dump(rollout)
            blob = buffer.getvalue()
            if watch.reduced:
                self.values.load(blob)  # the parent's test, before it refuses
            return blob
        except Exception:
            fields = {name: plain(getattr(rollout, name)) for name in ("output", "trace", "tool_calls")}
            fields["metadata"] = plain(rollout.metadata)
            return dumps(Rollout(**{**vars(rollout), **fields}))


class _PlainWatch(pickle.Pickler):
    """A pickler that notes whether any object but a :class:`Rollout` (and its class) needed a reduce:
    pickle calls :meth:`reducer_override` for every object except None, booleans and exact ints,
    floats, bytes, str, dicts, sets, frozensets, lists and tuples, which pickle as values."""

    reduced = False

    def reducer_override(self, obj: Any) -> Any:
        if obj is not Rollout and type(obj) is not Rollout:  # the class is saved with its instance
            self.reduced = True
        return NotImplemented


def _guarded(call: Callable[..., Scored], *args: Any, **kwargs: Any) -> Scored:
    """``call`` whatever it raises: a BaseException out of the adapter is an infra error here."""
    try:
        return call(*args, **kwargs)
    except RolloutTimeout as exc:
        return Scored(rollout=None, infra_error=f"timeout: {exc}")
    except BaseException as exc:
        return Scored(rollout=None, infra_error=f"run_target raised {type(exc).__name__}: {exc}")


async def _guarded_run_async(runner: AdapterRunner, task: Task, candidate_dir: Path, **kwargs: Any) -> Scored:
    import asyncio

    try:
        return await run_target_here_async(runner, task, candidate_dir, **kwargs)
    except asyncio.CancelledError:
        raise  # the pool's deadline: its timeout answer
    except BaseException as exc:
        return Scored(rollout=None, infra_error=f"run_target raised {type(exc).__name__}: {exc}")


def main() -> None:
    # a snapshot is never edited, not even by Python's bytecode cache: a worker on another
    # machine (no PYTHONDONTWRITEBYTECODE there) would otherwise add __pycache__/*.pyc to its copy,
    # which the snapshot check rightly reads as an edit
    sys.dont_write_bytecode = True
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the candidate's fd-level writes go where stderr goes, never into a frame
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_alarm_handler()  # SIGALRM is the deadline's alone here
    sys.stdout = RoutedStream(sys.stdout, "stdout")  # type: ignore[assignment]
    sys.stderr = RoutedStream(sys.stderr, "stderr")  # type: ignore[assignment]
    logging.root.addHandler(_KeepRecords())
    child = Child(proto_in, proto_out)
    payload = child.reader.read()
    if payload is None:
        os._exit(0)
    child.start(pickle.loads(payload))
    try:
        child.serve()
        # the pipe ended (the parent is done with this child): what the adapter registered to
        # run at exit (an inspect task's temporary log folder, a client to close) runs now, as
        # it would in process; os._exit skips it
        atexit._run_exitfuncs()
    finally:
        os._exit(0)  # threads the adapter left running do not hold the child open
