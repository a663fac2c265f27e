"""Candidate code runs in a sandbox child; the process that scores never imports it.

In every process that evaluates rollouts (the plain session, each xdist worker, the
``adapter`` microcase check, ``capevolve check``) the adapter's runner is built by
:func:`isolated`: its ``live()``/``apply()`` + ``run_target`` half runs in a child process
(:mod:`.sandbox_child`), started fresh with ``subprocess`` (a new interpreter, never a fork of
this one), one per candidate folder, so one candidate's code can neither reach the scorer nor
another candidate's rollouts. The rollout comes back over a pipe as data (:mod:`.wire`, read
with an unpickler that only makes values); :func:`.runner.run_and_score` scores it here.

- **A child that dies** (``os._exit``, a segfault, a kill) while it runs rollouts ends them as
  the candidate's failures (reward 0, labelled: :func:`.runner.charge`) — the candidate's code
  ran there, and a death it chose must not become missing data a later session pays again
  with a fresh draw — and the next rollout starts a new child. So does a child that answers
  garbage or another request. A child that cannot start or get ready (the adapter's import, a
  start-up hook moved) is the harness's failure: infra errors, missing data.
- **A hung child is killed**: the child keeps each rollout's deadline itself (the SIGALRM timer
  inline, the watchdog in flight); if it has not answered ``rollout_timeout_s`` + :data:`GRACE_S`
  after a request was sent, this side kills it and its rollouts are timeouts: the candidate's
  failures too.
- **What a rollout printed and logged** in the child comes back with its answer and is written
  and logged again here, in the thread (or task) that waits for it — under the item's capture at
  concurrency 1, into the rollout's own buffer in flight (:mod:`.rollout_output`) — so reports
  keep the sections they had in-process.

A sync rollout asked for on the main thread (concurrency 1) of a child nothing was sent ahead
to is one request and one answer on the pipe, with no thread in between; otherwise a reader
thread per child (started once, with its first request in flight) hands answers to futures.
At concurrency 1 the next item's request may be **sent ahead** (:meth:`Sandboxes.send_ahead`,
from the item layer): right after this rollout's answer has been read, before it is scored
and persisted, so the child runs the next rollout while this process does its share of the
current one. The child still runs one rollout at a time, and a request is only ever sent to an
idle child (never queued behind a rollout), and its answer is read as it arrives by the
child's reader thread, not when the next item collects it, so its deadline and its
``seconds`` (from the request sent to its whole answer read) mean what they meant however
long this process takes over the last one; an answer sent ahead for an item that then asks
for something else is read and dropped. No thread is started per rollout.

See docs/explanation/candidate-isolation.md for what this does and does not protect.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._confine.landlock import Confinement
from .._project import startup_hooks
from .._project.adapter import Rollout, Task
from .._project.spec import Spec
from .runner import AdapterRunner, Scored
from .sandbox_boundary import Fence
from .wire import SAME_TASK, FrameReader, ValueLoader, WireError, frame, load_answer, write_all, write_frame

GRACE_S = 2.0  # past its deadline, how long a child may take to answer before it is killed
READY_S = 120.0  # how long a new child may take to import the adapter
POLL_S = 1.0  # how often a reader thread with nothing pending looks at deadlines again
MAX_CHILDREN = 8  # live children per process; the least recently used idle one is ended first
CHILD = "from pytest_capevolve._engine.sandbox_child import main; main()"


class SandboxError(Exception):
    """A sandbox child could not be started: every rollout asked of it is an infra error."""


def isolated(
    adapter: Any, ref: str, project_dir: Path, judge_rescores: int = 1, *, spec: Spec | None = None
) -> AdapterRunner:
    """The runner of ``adapter`` (loaded here from ``ref``, for tasks and scores) whose
    candidate side runs in sandbox children that load the same ``ref``, each confined to the
    boundary of ``spec``'s project (:mod:`.sandbox_boundary`; without a spec: the run dir
    hidden, no gold); ``judge_rescores``: times a declared-stochastic scorer
    scores each output (:mod:`.judging`)."""
    runner = AdapterRunner(adapter, judge_rescores)
    runner.targets = Sandboxes(ref, project_dir, harness_modules=[type(adapter).__module__], spec=spec)
    return runner


@dataclass
class Answer:
    """One child's answer to one request, as values."""

    scored: Scored
    stdout: str = ""
    stderr: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)

    def replay(self) -> None:
        """Write and log here what the rollout wrote and logged in the child."""
        if self.stdout:
            sys.stdout.write(self.stdout)
        if self.stderr:
            sys.stderr.write(self.stderr)
        for fields in self.records:
            record = logging.makeLogRecord(fields)
            logging.getLogger(record.name).handle(record)


def _lost(message: str, seconds: float = 0.0) -> Answer:
    """A rollout the harness failed to run (no child could start): missing data."""
    return Answer(Scored(rollout=None, infra_error=message, seconds=round(seconds, 6)))


def _caused(message: str, seconds: float = 0.0) -> Answer:
    """A rollout its child ended, as this side saw it (a death, a kill, a timeout, garbage on
    the pipe): the candidate's failure (:func:`.runner.charge`)."""
    return Answer(Scored(rollout=None, caused=message, seconds=round(seconds, 6)))


# a rollout asked for, before it is a request to one child: (task id, the task's pickle or None,
# candidate folder, seed, split, timeout_s, log level, inline) — see .wire.REQUEST_FIELDS
Ask = tuple[str, "bytes | None", str, int, str, "float | None", int, bool]


class Sandboxes:
    """The :class:`.runner.Targets` of an isolated runner: one :class:`Sandbox` per candidate
    folder, started on its first rollout."""

    def __init__(
        self, ref: str, project_dir: Path, *, harness_modules: list[str], spec: Spec | None = None
    ) -> None:
        self.ref = ref
        self.project_dir = project_dir
        self.harness_modules = harness_modules
        self.spec = spec
        self._fence: Fence | None = None
        # called once, on the main thread, right after the next inline answer is read (before it
        # is scored): how the item layer sends the next item's request ahead (:meth:`send_ahead`)
        self.after_answer: Callable[[], object] | None = None
        self._children: OrderedDict[str, Sandbox] = OrderedDict()
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._task_blobs: dict[str, tuple[Task, bytes | None]] = {}
        self._folders: dict[Path, str] = {}
        self.values = ValueLoader(harness_modules)  # how every child's answers are read
        self._closed = False
        atexit.register(self.close)

    def _sandbox(self, candidate_dir: Path) -> Sandbox:
        key = str(candidate_dir)
        with self._lock:
            sandbox = self._children.get(key)
            if sandbox is None:
                if self._closed:  # used again after close(): the last resort again
                    self._closed = False
                    atexit.register(self.close)
                sandbox = self._children[key] = Sandbox(self, candidate_dir)
                idle = [k for k, s in self._children.items() if k != key and s.idle()]
                for old in idle[: max(0, len(self._children) - MAX_CHILDREN)]:
                    self._children.pop(old).close()
            self._children.move_to_end(key)
            return sandbox

    def fence(self) -> Fence:
        """The boundary's fixed part, computed when the first child starts (it globs the
        project's gold files once per runner)."""
        if self._fence is None:
            self._fence = (
                Fence.of_spec(self.spec) if self.spec is not None else Fence.of_project(self.project_dir)
            )
        return self._fence

    def _ask(
        self, task: Task, candidate_dir: Path, *, seed: int, split: str, timeout_s: float | None, inline: bool
    ) -> Ask:
        cached = self._task_blobs.get(task.id)
        if cached is None or cached[0] is not task:
            try:
                blob: bytes | None = pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # the child takes the same task from its own tasks("all")
                blob = None
            cached = self._task_blobs[task.id] = (task, blob)
        folder = self._folders.get(candidate_dir)
        if folder is None:
            folder = self._folders[candidate_dir] = str(candidate_dir)
        return (task.id, cached[1], folder, seed, split, timeout_s, logging.root.level, inline)

    def _label(self, scored: Scored, sandbox: Sandbox) -> None:
        """The child's confinement on its rollout; a confined child's refused write or read
        named as the boundary's, with the way on (``sandbox_writable``, ``TMPDIR``)."""
        scored.confinement = sandbox.label
        if scored.infra_error and sandbox.confinement is not None and sandbox.confinement.confined:
            scored.infra_error = self.fence().explain(scored.infra_error)

    def run(
        self, task: Task, candidate_dir: Path, *, seed: int, split: str, timeout_s: float | None
    ) -> Scored:
        inline = threading.current_thread() is threading.main_thread()
        ask = self._ask(task, candidate_dir, seed=seed, split=split, timeout_s=timeout_s, inline=inline)
        then, self.after_answer = self.after_answer, None
        sandbox = self._sandbox(candidate_dir)
        answer = sandbox.exchange(ask) if inline else sandbox.submit(ask).result()
        self._label(answer.scored, sandbox)
        if then is not None and inline:
            try:
                then()
            except Exception:  # only a head start: the next item asks for its rollout itself
                pass
        answer.replay()
        return answer.scored

    def send_ahead(
        self, task: Task, candidate_dir: Path, *, seed: int, split: str, timeout_s: float | None
    ) -> bool:
        """On the main thread: send the rollout :meth:`run` will be asked for next to its
        candidate's child now, if that child is running and idle; the :meth:`run` asking for
        the same rollout (same task, folder, seed, split, timeout and log level) collects its
        answer. False when nothing was sent (the caller's :meth:`run` then sends it as usual)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        ask = self._ask(task, candidate_dir, seed=seed, split=split, timeout_s=timeout_s, inline=True)
        with self._lock:
            sandbox = self._children.get(str(candidate_dir))
        return sandbox is not None and sandbox.send_ahead(ask)

    async def run_async(
        self, task: Task, candidate_dir: Path, *, seed: int, split: str, timeout_s: float | None
    ) -> Scored:
        ask = self._ask(task, candidate_dir, seed=seed, split=split, timeout_s=timeout_s, inline=False)
        sandbox = self._sandbox(candidate_dir)
        answer = await asyncio.wrap_future(sandbox.submit(ask))
        self._label(answer.scored, sandbox)
        answer.replay()
        return answer.scored

    def close(self) -> None:
        """End every child, reaping it (idempotent). Whoever built the runner calls it when its
        session or command ends; ``atexit`` is only the last resort, dropped here so a closed
        runner is not held until the process exits."""
        with self._lock:
            self._closed = True
            children = list(self._children.values())
            self._children.clear()
        atexit.unregister(self.close)
        for sandbox in children:
            sandbox.close()


@dataclass
class _Pending:
    future: Future[Answer]
    sent: float
    deadline: float | None


class Sandbox:
    """One child process and the rollouts it is running."""

    def __init__(self, owner: Sandboxes, candidate_dir: Path) -> None:
        self.owner = owner
        self.candidate_dir = candidate_dir
        # what the last child said of its boundary in its ``ready`` frame (sent before it loaded
        # the adapter, so before any candidate byte ran): the label its rollouts carry
        self.confinement: Confinement | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.reader: FrameReader | None = None
        self.pending: dict[int, _Pending] = {}
        self.reading = False  # a reader thread serves this child's answers
        self.sent: dict[str, bytes] = {}  # task id -> the pickle this child was sent for it
        # a request sent ahead (:meth:`send_ahead`) that no exchange has collected yet: the ask
        # and its answer to come (cleared whenever the child is)
        self.ahead: tuple[Ask, Future[Answer]] | None = None
        self._lock = threading.RLock()

    def idle(self) -> bool:
        return not self.pending and self.ahead is None

    @property
    def label(self) -> str | None:
        return None if self.confinement is None else self.confinement.label

    # -- the child's life ----------------------------------------------------------------------

    def _ensure(self) -> tuple[subprocess.Popen[bytes], FrameReader]:
        """The running child, started if there is none (under ``_lock``)."""
        if self.proc is not None and self.reader is not None:
            return self.proc, self.reader
        moved = startup_hooks.moved_since_start()  # a .pth planted by a candidate this session
        if moved:
            raise SandboxError(startup_hooks.refusal(moved))
        # the child's own scratch, outside the project and its run dir: the one folder it may
        # write (besides the spec's sandbox_writable); removed when the child ends (:func:`_end`)
        scratch = tempfile.mkdtemp(prefix="capevolve-sandbox-")
        try:
            boundary = self.owner.fence().boundary(self.candidate_dir, Path(scratch))
            proc = _ChildProcess(
                [sys.executable, *startup_hooks.child_flags(), "-c", CHILD],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
                env=scratch_env(scratch),
            )
        except (ValueError, OSError) as exc:  # a sandbox_writable that would open a hidden folder
            shutil.rmtree(scratch, ignore_errors=True)
            raise SandboxError(f"the sandbox process did not start: {exc}") from None
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        proc.scratch = scratch
        assert proc.stdin is not None and proc.stdout is not None
        reader = FrameReader(proc.stdout.fileno())
        init = {
            "sys_path": list(sys.path),
            "ref": self.owner.ref,
            "project_dir": str(self.owner.project_dir),
            "boundary": boundary.as_json(),
        }
        try:
            write_all(proc.stdin.fileno(), frame(init))
            payload = reader.read(time.monotonic() + READY_S)
            ready = None if payload is None else load_answer(payload, ())
        except (OSError, TimeoutError, WireError) as exc:
            _end(proc)
            raise SandboxError(f"the sandbox process did not start: {type(exc).__name__}: {exc}") from None
        if not isinstance(ready, dict) or "ready" not in ready:
            code = _end(proc)
            why = ready.get("fatal") if isinstance(ready, dict) else None
            raise SandboxError(
                str(why or f"the sandbox process exited before it was ready ({_exit_text(code)})")
            )
        self.proc, self.reader, self.sent, self.ahead = proc, reader, {}, None
        said = ready.get("confinement")
        said = said if isinstance(said, dict) else {"why": "the sandbox child did not say"}
        self.confinement = Confinement(
            bool(said.get("confined")),
            int(said.get("abi") or 0),
            str(said.get("why") or ""),
            bool(said.get("scoped")),
        )
        return proc, reader

    def _request(self, ask: Ask) -> tuple[int, bytes]:
        """``ask`` as this child's next request: its id and pickle (under ``_lock``, so requests
        go out in the order :attr:`sent` assumes). A task's pickle goes to a child once; after
        that, SAME_TASK."""
        request_id = next(self.owner._ids)
        task_id, blob = ask[0], ask[1]
        task: bytes | int | None = blob
        if blob is not None:
            if self.sent.get(task_id) is blob:
                task = SAME_TASK
            else:
                self.sent[task_id] = blob
        return request_id, pickle.dumps(
            (request_id, task_id, task, *ask[2:]), protocol=pickle.HIGHEST_PROTOCOL
        )

    def _send(self, proc: subprocess.Popen[bytes], request: bytes) -> bool:
        assert proc.stdin is not None
        try:
            write_frame(proc.stdin.fileno(), request)
        except OSError:
            return False  # it is gone: its reader (or the exchange) says how
        return True

    def _lose_child(self, proc: subprocess.Popen[bytes], message: str, *, caused: bool = True) -> None:
        """The child ``proc`` is dead or killed: every rollout it was running is the
        candidate's failure (``caused``), or lost when this side ended it (the sandbox closed)."""
        with self._lock:
            if self.proc is proc:
                self.proc, self.reader, self.reading, self.ahead = None, None, False, None
            pending, self.pending = self.pending, {}
        now = time.monotonic()
        ended = _caused if caused else _lost
        for waiting in pending.values():
            _settle(waiting.future, ended(message, now - waiting.sent))

    # -- concurrency 1: one request, one answer, on the calling thread -------------------------

    def exchange(self, ask: Ask) -> Answer:
        answer = self._collect_ahead(ask)
        if answer is not None:
            return answer
        with self._lock:
            if not self.reading:
                return self._exchange_locked(ask)
            future = self._submit_locked(ask)  # a reader thread owns the pipe: wait for its answer
        return future.result()

    def send_ahead(self, ask: Ask) -> bool:
        """Send ``ask`` (inline) now, to be collected by the next :meth:`exchange` asking for the
        same: only to a running child with nothing outstanding, so it starts the rollout at once
        and its deadline runs from now, as an exchange's would. Its answer is read as it arrives
        by the child's reader thread (started once per child, not once per rollout)."""
        with self._lock:
            if self.proc is None or self.reader is None or self.pending or self.ahead is not None:
                return False
            self.ahead = (ask, self._submit_locked(ask))
            return True

    def _collect_ahead(self, ask: Ask | None) -> Answer | None:
        """The answer to the request sent ahead when it is ``ask``'s; another's (its item did
        not run it) is waited for and dropped, so the child is idle again: a request is never
        queued behind a rollout. None when nothing was sent ahead for ``ask``."""
        with self._lock:
            ahead, self.ahead = self.ahead, None
        if ahead is None:
            return None
        answer = ahead[1].result()  # its deadline is kept by the reader thread
        return answer if ahead[0] == ask else None

    def _exchange_locked(self, ask: Ask) -> Answer:
        try:
            proc, reader = self._ensure()
        except SandboxError as exc:
            return _lost(str(exc))
        timeout_s = ask[5]
        sent = time.monotonic()
        request_id, request = self._request(ask)
        delivered = self._send(proc, request)
        deadline = None if timeout_s is None else sent + timeout_s + GRACE_S
        try:
            payload = reader.read(deadline) if delivered else None
            if payload is None:
                code = _end(proc)
                message = _died(code)
            else:
                answer = _decode(payload, self.owner.values, time.monotonic() - sent)
                if answer[0] == request_id:
                    return answer[1]
                message = "the sandbox process answered another request than the one asked: it was killed"
                _end(proc)
        except TimeoutError:
            _end(proc)
            message = _killed_late(timeout_s)
        except WireError as exc:
            _end(proc)
            message = f"the sandbox process sent a malformed answer ({exc}): it was killed"
        self.proc, self.reader = None, None
        return _caused(message, time.monotonic() - sent)

    # -- in flight: a reader thread hands answers to futures -----------------------------------

    def submit(self, ask: Ask) -> Future[Answer]:
        self._collect_ahead(None)  # not collected on the main thread: read and dropped first
        with self._lock:
            return self._submit_locked(ask)

    def _submit_locked(self, ask: Ask) -> Future[Answer]:
        future: Future[Answer] = Future()
        try:
            proc, reader = self._ensure()
        except SandboxError as exc:
            future.set_result(_lost(str(exc)))
            return future
        timeout_s = ask[5]
        sent = time.monotonic()
        deadline = None if timeout_s is None else sent + timeout_s + GRACE_S
        request_id, request = self._request(ask)
        self.pending[request_id] = _Pending(future, sent, deadline)
        if not self.reading:
            self.reading = True
            threading.Thread(
                target=self._read_answers, args=(proc, reader), name="capevolve-sandbox-reader", daemon=True
            ).start()
        self._send(proc, request)
        return future

    def _read_answers(self, proc: subprocess.Popen[bytes], reader: FrameReader) -> None:
        while True:
            with self._lock:
                if self.proc is not proc:
                    return
                deadlines = [p.deadline for p in self.pending.values() if p.deadline is not None]
            now = time.monotonic()
            wake = min([*deadlines, now + POLL_S])
            try:
                payload = reader.read(wake)
            except TimeoutError:
                overdue = [d for d in deadlines if d <= time.monotonic()]
                if overdue:
                    _end(proc)
                    timeouts = [p for p in self.pending.values() if p.deadline is not None]
                    timeout_s = (
                        None if not timeouts else (timeouts[0].deadline or 0.0) - timeouts[0].sent - GRACE_S
                    )
                    self._lose_child(proc, _killed_late(timeout_s))
                    return
                continue
            except WireError as exc:
                _end(proc)
                self._lose_child(proc, f"the sandbox process sent a malformed answer ({exc}): it was killed")
                return
            except (OSError, ValueError):  # its pipe closed under this thread (the sandbox closed)
                self._lose_child(proc, _died(_end(proc)), caused=False)
                return
            if payload is None:
                self._lose_child(proc, _died(_end(proc)))
                return
            try:
                request_id, answer = _decode(payload, self.owner.values, 0.0)
            except WireError as exc:
                _end(proc)
                self._lose_child(proc, f"the sandbox process sent a malformed answer ({exc}): it was killed")
                return
            with self._lock:
                waiting = self.pending.pop(request_id, None)
            if waiting is not None:
                answer.scored.seconds = round(time.monotonic() - waiting.sent, 6)
                _settle(waiting.future, answer)

    def close(self) -> None:
        with self._lock:
            proc, self.proc, self.reader, self.ahead = self.proc, None, None, None
        if proc is not None:
            _end(proc, gently=True)
            self._lose_child(proc, "the sandbox was closed before the rollout ended", caused=False)


def _settle(future: Future[Answer], answer: Answer) -> None:
    try:
        future.set_result(answer)
    except InvalidStateError:  # given up on (its task cancelled at its deadline)
        pass


class _ChildProcess(subprocess.Popen[bytes]):
    """A sandbox child, with the scratch folder that is its to write (removed by :func:`_end`)."""

    scratch: str | None = None


SCRATCH_ENV = ("TMPDIR", "TEMP", "TMP")  # where the child's tempfile and its tools make files
# where tools keep per-user data and state (platformdirs: inspect_ai's traces and sample buffers):
# in the scratch too, since the boundary lets the child write nothing under $HOME. Caches stay
# where they are, readable: a model cache moved to an empty folder would be fetched again
SCRATCH_XDG = ("XDG_DATA_HOME", "XDG_STATE_HOME")


def scratch_env(scratch: str) -> dict[str, str]:
    """The child's environment: this process's, with its temporary, data and state folders in
    ``scratch`` (the one folder it may write besides the spec's ``sandbox_writable``)."""
    env = {**os.environ, **dict.fromkeys(SCRATCH_ENV, scratch)}
    env.update({name: os.path.join(scratch, name.lower()) for name in SCRATCH_XDG})
    return env


def _end(proc: subprocess.Popen[bytes], *, gently: bool = False) -> int | None:
    """End ``proc`` (closing its pipe first when ``gently``: it exits at end of file) and reap it,
    then remove its scratch folder."""
    try:
        if gently and proc.stdin is not None:
            proc.stdin.close()
            try:
                return proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        proc.kill()
        return proc.wait(timeout=5.0)
    except (OSError, subprocess.TimeoutExpired):
        return proc.returncode
    finally:
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        scratch = getattr(proc, "scratch", None)
        if scratch and proc.returncode is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _exit_text(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _died(code: int | None) -> str:
    return (
        f"the sandbox process running the candidate's code ended during the rollout "
        f"({_exit_text(code)}); a new one runs the next rollout"
    )


def _killed_late(timeout_s: float | None) -> str:
    return (
        f"timeout: rollout exceeded rollout_timeout_s={timeout_s} and its sandbox process did not "
        f"answer {GRACE_S:g}s later: it was killed"
    )


def _decode(payload: bytes, values: ValueLoader, seconds: float) -> tuple[int, Answer]:
    """An answer frame (:data:`.wire.ANSWER_FIELDS`, then the rollout's pickle if announced) as
    values, checked field by field; WireError for anything else. ``seconds``: how long this
    side waited for it — the rollout's time, as this side saw it."""
    loaded = values.load_all(payload, 2)
    head = loaded[0]
    if not (type(head) is tuple and len(head) == 6 and type(head[0]) is int):
        raise WireError("an answer without a request id")
    request_id, infra_error, stdout, stderr, records, has_rollout = head
    if not (infra_error is None or isinstance(infra_error, str)):
        raise WireError("infra_error is not text")
    if not (isinstance(stdout, str) and isinstance(stderr, str)):
        raise WireError("captured output is not text")
    if not (isinstance(records, list) and all(isinstance(r, dict) for r in records)):
        raise WireError("log records are not fields")
    if len(loaded) != (2 if has_rollout is True else 1):
        raise WireError("the answer's rollout is not the one it announced")
    rollout = loaded[1] if has_rollout is True else None
    if rollout is not None and not isinstance(rollout, Rollout):
        raise WireError(f"the rollout is a {type(rollout).__name__}, not a Rollout")
    if rollout is None and infra_error is None:
        infra_error = "the sandbox process answered with neither a rollout nor an error"
    scored = Scored(rollout=rollout, infra_error=infra_error, seconds=round(seconds, 6))
    return request_id, Answer(scored, stdout, stderr, records)
