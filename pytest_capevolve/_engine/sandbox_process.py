"""One sandbox child (:class:`Sandbox`): starting it inside its boundary with a scratch folder
of its own, sending it requests (one at a time, or several sent ahead, run in turn), reading its
answers (inline, or on a reader thread; :mod:`.answers`), and ending it. :mod:`.sandbox` keeps
one per folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._confine.landlock import Confinement
from .._project import startup_hooks
from .answers import (
    GRACE_S,
    MISANSWERED,
    NEVER_RAN,
    Answer,
    caused_answer,
    decode_answer,
    died,
    exit_text,
    garbled,
    killed_late,
    lost_answer,
)
from .scratch import new_scratch, scratch_env
from .wire import SAME_TASK, FrameReader, ValueLoader, WireError, dumps, frame, write_all, write_frames

if TYPE_CHECKING:
    from .sandbox import Sandboxes

READY_S = 120.0  # how long a new child may take to import the adapter
POLL_S = 1.0  # how often a reader thread with nothing pending looks at deadlines again
CHILD = "from pytest_capevolve._engine.sandbox_child import main; main()"
# requests sent ahead to one child: at most MAX_AHEAD, as many as the last rollout's pace fits in
# AHEAD_S (:func:`ahead_depth`: a rollout of an LLM's seconds gets one, a no-op one several), and
# their bytes within one page, which a pipe always holds: a write ahead never waits on a busy child
MAX_AHEAD, AHEAD_S, AHEAD_BYTES = 8, 0.01, 4096


class SandboxError(Exception):
    """A sandbox child could not be started: every rollout asked of it is an infra error."""


def ahead_depth(pace: float) -> int:
    """How many requests one child may hold ahead when its last rollout took ``pace`` seconds."""
    return max(1, min(MAX_AHEAD, int(AHEAD_S / pace) if pace > 0 else MAX_AHEAD))


# a rollout asked for, before it is a request to one child: (task id, the task's pickle or None,
# candidate folder, seed, split, timeout_s, log level, inline) — see .wire.REQUEST_FIELDS
Ask = tuple[str, "bytes | None", str, int, str, "float | None", int, bool]


@dataclass
class _Pending:
    sent: float  # when it started: sent, or queued behind another until that one's answer was read
    deadline: float | None
    timeout_s: float | None
    size: int = 0  # its frame's bytes
    queued: bool = False  # sent ahead behind a request not yet answered: not started, no deadline yet
    handed: bool = False  # a request sent ahead whose answer a reader thread reads (:meth:`Sandbox._watch`)
    _future: Future[Answer] | None = None

    @property
    def future(self) -> Future[Answer]:
        """Made as a request enters ``pending`` (under the lock): an exchange reading its own needs none."""
        if self._future is None:
            self._future = Future()
        return self._future

    def start(self, now: float) -> None:
        self.sent, self.queued = now, False
        self.deadline = None if self.timeout_s is None else now + self.timeout_s + GRACE_S


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
        # requests sent ahead (:meth:`send_ahead`), in order, that no exchange has collected yet
        # (cleared whenever the child is); the child _watch looks at, and how often; the last
        # rollout's seconds, read inline (:func:`ahead_depth`)
        self.ahead: deque[tuple[Ask, int, _Pending]] = deque()
        self.watched: subprocess.Popen[bytes] | None = None
        self.period = POLL_S
        self.pace = AHEAD_S
        self._lock = threading.RLock()

    def idle(self) -> bool:
        return not self.pending and not self.ahead

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
        # write (besides the spec's sandbox_writable); removed when the child ends (:func:`end`)
        try:
            scratch = new_scratch("capevolve-sandbox-")
        except OSError as exc:
            raise SandboxError(f"the sandbox process did not start: {exc}") from None
        try:
            boundary = self.owner.fence().boundary(self.candidate_dir, Path(scratch))
            argv = [sys.executable, *startup_hooks.child_flags(), "-c", CHILD]
            # a session of its own: no controlling terminal, so candidate code cannot type into
            # the user's shell (TIOCSTI on /dev/tty), which would run it outside the boundary
            proc = _ChildProcess(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
                env=scratch_env(scratch),
                start_new_session=True,
            )
        except (ValueError, OSError) as exc:  # a sandbox_writable that would open a hidden folder
            shutil.rmtree(scratch, ignore_errors=True)
            raise SandboxError(f"the sandbox process did not start: {exc}") from None
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        proc.scratch = scratch
        assert proc.stdin is not None and proc.stdout is not None
        reader = FrameReader(proc.stdout.fileno(), nonblocking=True)
        init = {
            "sys_path": list(sys.path),
            "ref": self.owner.ref,
            "project_dir": str(self.owner.project_dir),
            "boundary": boundary.as_json(),
        }
        try:
            write_all(proc.stdin.fileno(), frame(init))
            payload = reader.read(time.monotonic() + READY_S)
            ready = None if payload is None else ValueLoader(()).load(payload)
        except (OSError, TimeoutError, WireError) as exc:
            end(proc)
            raise SandboxError(f"the sandbox process did not start: {type(exc).__name__}: {exc}") from None
        if not isinstance(ready, dict) or "ready" not in ready:
            code = end(proc)
            why = ready.get("fatal") if isinstance(ready, dict) else None
            raise SandboxError(
                str(why or f"the sandbox process exited before it was ready ({exit_text(code)})")
            )
        self.proc, self.reader, self.sent, self.ahead = proc, reader, {}, deque()
        said = ready.get("confinement")
        if not (isinstance(said, dict) and "confined" in said):
            said = {"confined": False, "why": "the sandbox child did not say"}
        self.confinement = Confinement.from_json(said)
        return proc, reader

    def _request(self, ask: Ask) -> tuple[int, bytes, _Pending]:
        """``ask`` as this child's next request, its id, pickle and deadline from now (under ``_lock``:
        requests go out in the order :attr:`sent` assumes); a task's pickle goes to a child once."""
        timeout_s, sent = ask[5], time.monotonic()
        deadline = None if timeout_s is None else sent + timeout_s + GRACE_S
        request_id = next(self.owner._ids)
        task_id, blob = ask[0], ask[1]
        task: bytes | int | None = blob
        if blob is not None:
            if self.sent.get(task_id) is blob:
                task = SAME_TASK
            else:
                self.sent[task_id] = blob
        request = dumps((request_id, task_id, task, *ask[2:]))
        return request_id, request, _Pending(sent, deadline, timeout_s, len(request))

    def _send(self, proc: subprocess.Popen[bytes], *requests: bytes) -> bool:
        """``requests`` in one write: the child reads them in one too, and runs them in turn."""
        assert proc.stdin is not None
        try:
            write_frames(proc.stdin.fileno(), [(request,) for request in requests])
        except OSError:
            return False  # it is gone: its reader (or the exchange) says how
        return True

    def _lose_child(self, proc: subprocess.Popen[bytes], message: str, *, caused: bool = True) -> None:
        """The child ``proc`` is dead, killed or closed: every rollout it was running is the
        candidate's failure (``caused``), or lost when this side closed it. Whoever lets it go
        first takes its rollouts, under the lock. A request sent ahead keeps its settled future:
        its exchange collects that answer, never runs it again (a re-roll the crash chose)."""
        with self._lock:
            if self.proc is not proc:
                return
            self.proc, self.reader, self.reading = None, None, False
            pending, self.pending = self.pending, {}
        now = time.monotonic()
        ended = caused_answer if caused else lost_answer
        for waiting in pending.values():  # one queued behind the rollout that ended never ran
            _settle(waiting.future, NEVER_RAN if waiting.queued else ended(message, now - waiting.sent))

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

    def room(self) -> tuple[int, int]:
        """How many requests sent ahead this child holds (the next rollouts', in order), and how many
        more :meth:`send_ahead` may send now: up to :func:`ahead_depth` held, topped up once all but
        one are collected (so each write carries several, and the child is not left idle); one at
        a time, and only when nothing is outstanding, once a reader thread owns the pipe."""
        with self._lock:
            held = len(self.ahead)
            if self.proc is None or self.pending:
                return held, 0
            if self.reading:
                return held, 0 if held else 1
            depth = ahead_depth(self.pace)
            return held, depth - held if held <= 1 else 0

    def send_ahead(self, *asks: Ask) -> int:
        """Send ``asks`` now, in one write, for the :meth:`exchange` asking for each to collect (how
        many were sent): only to a running child, the first ones within :data:`AHEAD_BYTES`. A request with
        nothing before it starts now, as an exchange's would; one queued behind another starts
        (its deadline and seconds from then) when the answer before it is read. Its exchange reads
        its answer (no thread woken per rollout) unless :meth:`_watch` handed it to a reader
        thread: a slow score of the rollout before is never its lateness."""
        with self._lock:
            proc = self.proc
            if proc is None or self.reader is None or self.pending or (self.reading and self.ahead):
                return 0
            held = sum(entry[2].size for entry in self.ahead)
            requests = []
            for ask in asks:
                had = self.sent.get(ask[0])
                request_id, request, asked = self._request(ask)
                held += asked.size
                if self.ahead and held > AHEAD_BYTES:  # not sent: nor is its task's pickle
                    if had is None:
                        self.sent.pop(ask[0], None)
                    else:
                        self.sent[ask[0]] = had
                    break
                if self.ahead:
                    asked.queued, asked.deadline = True, None
                self.ahead.append((ask, request_id, asked))
                requests.append(request)
            if not requests:
                return 0
            self.period = min(POLL_S, (self.ahead[-1][2].timeout_s or POLL_S) / 4)
            if self.reading:  # a reader thread owns the pipe: it reads these answers too
                self._hand_over(proc)
            elif self.watched is not proc:
                self.watched = proc
                threading.Thread(
                    target=self._watch, args=(proc,), name="capevolve-sandbox-watch", daemon=True
                ).start()
            self._send(proc, *requests)
            return len(requests)

    def _watch(self, proc: subprocess.Popen[bytes]) -> None:
        """Hands requests sent ahead to ``proc`` and unread for :attr:`period` to a reader thread."""
        while True:
            with self._lock:
                if self.proc is not proc or self.reading:
                    return
                if self.ahead and time.monotonic() - self.ahead[0][2].sent >= self.period:
                    self._hand_over(proc)
                period = self.period
            time.sleep(period)

    def _hand_over(self, proc: subprocess.Popen[bytes]) -> None:
        for _, request_id, asked in self.ahead:
            asked.future  # noqa: B018  (made here, under the lock, before a reader can settle it)
            asked.handed, self.pending[request_id] = True, asked
        self._start_reading(proc)

    def _start_next(self) -> None:
        """The answer before it read: the first request queued ahead has started (under ``_lock``)."""
        for _, _, asked in self.ahead:
            if asked.queued:
                asked.start(time.monotonic())
                return

    def _collect_ahead(self, ask: Ask | None) -> Answer | None:
        """The answer to ``ask``'s request sent ahead, None when there is none or it never ran (its
        child died before it: run afresh); the answers to requests sent before it are read and
        dropped, so a request is never queued behind a rollout nobody collects."""
        while True:
            with self._lock:
                if not self.ahead:
                    return None
                asked_for, request_id, asked = self.ahead.popleft()
                if not asked.handed and self.proc is None:
                    self.ahead.clear()  # their child is gone: none of them ran
                    return None
                # nobody reads it but this exchange: read here, under its deadline (no future made)
                read = None if asked.handed else self._answer(request_id, asked)
            # else read (and its deadline kept) by the reader thread it was handed to
            answer = asked.future.result() if read is None else read
            if asked_for == ask:
                return None if answer is NEVER_RAN else answer

    def _exchange_locked(self, ask: Ask) -> Answer:
        try:
            proc, _ = self._ensure()
        except SandboxError as exc:
            return lost_answer(str(exc))
        request_id, request, asked = self._request(ask)
        return self._answer(request_id, asked, delivered=self._send(proc, request))

    def _answer(self, request_id: int, asked: _Pending, delivered: bool = True) -> Answer:
        """The answer to ``request_id`` read here (under ``_lock``), or the child's end as its failure."""
        proc, reader, sent, timeout_s = self.proc, self.reader, asked.sent, asked.timeout_s
        assert proc is not None and reader is not None
        try:
            payload = reader.read(asked.deadline) if delivered else None
            if payload is None:
                message = died(end(proc))
            else:
                self.pace = time.monotonic() - sent
                answer = decode_answer(payload, self.owner.values, self.pace)
                if answer[0] == request_id:
                    self._start_next()
                    return answer[1]
                message = MISANSWERED
                end(proc)
        except TimeoutError:
            end(proc)
            message = killed_late(timeout_s)
        except WireError as exc:
            end(proc)
            message = garbled(exc)
        self.proc, self.reader = None, None
        self.ahead.clear()  # queued behind this rollout: they never ran
        return caused_answer(message, time.monotonic() - sent)

    # -- in flight: a reader thread hands answers to futures -----------------------------------

    def submit(self, ask: Ask) -> Future[Answer]:
        self._collect_ahead(None)  # not collected on the main thread: read and dropped first
        with self._lock:
            return self._submit_locked(ask)

    def _submit_locked(self, ask: Ask) -> Future[Answer]:
        try:
            proc, _ = self._ensure()
        except SandboxError as exc:
            lost: Future[Answer] = Future()
            lost.set_result(lost_answer(str(exc)))
            return lost
        request_id, request, asked = self._request(ask)
        future, self.pending[request_id] = asked.future, asked
        self._start_reading(proc)
        self._send(proc, request)
        return future

    def _start_reading(self, proc: subprocess.Popen[bytes]) -> None:
        if not self.reading and self.reader is not None:
            self.reading = True
            threading.Thread(
                target=self._read_answers,
                args=(proc, self.reader),
                name="capevolve-sandbox-reader",
                daemon=True,
            ).start()

    def _read_answers(self, proc: subprocess.Popen[bytes], reader: FrameReader) -> None:
        while True:
            with self._lock:
                if self.proc is not proc:
                    return
                deadlines = [p.deadline for p in self.pending.values() if p.deadline is not None]
            try:
                payload = reader.read(min([*deadlines, time.monotonic() + POLL_S]))
                decoded = None if payload is None else decode_answer(payload, self.owner.values, 0.0)
            except TimeoutError:
                if not any(d <= time.monotonic() for d in deadlines):
                    continue
                end(proc)
                timeouts = [p.timeout_s for p in self.pending.values() if p.deadline is not None]
                self._lose_child(proc, killed_late(timeouts[0] if timeouts else None))
                return
            except WireError as exc:
                end(proc)
                self._lose_child(proc, garbled(exc))
                return
            except (OSError, ValueError):  # its pipe closed under this thread (the sandbox closed)
                self._lose_child(proc, died(end(proc)), caused=False)
                return
            if decoded is None:
                self._lose_child(proc, died(end(proc)))
                return
            request_id, answer = decoded
            with self._lock:
                waiting = self.pending.get(request_id)
                early = waiting is not None and waiting.queued  # its answer before the one it waits on
                if not early:
                    self.pending.pop(request_id, None)
                    self._start_next()
            if early:
                end(proc)
                self._lose_child(proc, MISANSWERED)
                return
            if waiting is not None:
                answer.scored.seconds = round(time.monotonic() - waiting.sent, 6)
                _settle(waiting.future, answer)

    def close(self) -> None:
        with self._lock:
            proc, self.ahead = self.proc, deque()
        if proc is not None:
            self._lose_child(proc, "the sandbox was closed before the rollout ended", caused=False)
            end(proc, gently=True)


def _settle(future: Future[Answer], answer: Answer) -> None:
    with contextlib.suppress(InvalidStateError):  # given up on (its task cancelled at its deadline)
        future.set_result(answer)


class _ChildProcess(subprocess.Popen[bytes]):
    """A sandbox child, with the scratch folder that is its to write (removed by :func:`end`)."""

    scratch: str | None = None


def end(proc: subprocess.Popen[bytes], *, gently: bool = False) -> int | None:
    """End ``proc`` (closing its pipe first when ``gently``: it exits at end of file) and every
    process its candidate code started, reap it, then remove its scratch folder. The child leads a
    session of its own (:meth:`Sandbox._ensure`), so what it forked is in its process group: that
    group is killed too, else a grandchild would outlive the rollout (keep running, hold files,
    race the next rollout). One that left the group (``setsid``) is beyond this kill."""
    try:
        if gently and proc.stdin is not None:
            proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)  # its exit handlers run; the group outlives its leader
        # the group id stays taken while any member lives, so it names no stranger's group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.kill()  # itself, whatever group it is in now (a no-op once reaped)
        return proc.wait(timeout=5.0)
    except (OSError, subprocess.TimeoutExpired):
        return proc.returncode
    finally:
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        scratch = getattr(proc, "scratch", None)
        if scratch and proc.returncode is not None:
            shutil.rmtree(scratch, ignore_errors=True)
