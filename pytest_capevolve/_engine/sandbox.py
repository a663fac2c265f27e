"""Candidate code runs in a sandbox child; the process that scores never imports it.

:func:`isolated` builds an adapter's runner whose ``live()``/``apply()`` + ``run_target`` half
runs in a child process (:mod:`.sandbox_child`, driven by :mod:`.sandbox_process`): a fresh
interpreter, never a fork, one per candidate folder, so one candidate's code reaches neither the
scorer nor another candidate's rollouts. The rollout comes back as data (:mod:`.wire`) and is
scored here; what it printed and logged is replayed here, so reports keep their sections. A
child that dies, hangs past its deadline or answers garbage ends its rollouts as the
candidate's failures (:mod:`.sandbox_process`): a death it chose is never missing data a later
session pays again. At concurrency 1 the next items' requests may be sent ahead
(:meth:`Sandboxes.send_all_ahead`), so the child runs them while this process scores the current one.

What a child may reach (:class:`Fence`, a :class:`.._confine.landlock.Boundary` computed here from
the spec, applied by each child to itself before it loads the adapter): **write** its scratch
(its ``TMPDIR``) and the spec's ``sandbox_writable``; **read** everything **but** the project's
``.capevolve/``, the gold files (``harness_files``) and the shared ledger; and (ABI ≥ 6) not
signal the session that scores it. Gold is read by the scoring process only: tasks reach the
child pickled. See docs/explanation/candidate-isolation.md for what this does and does not protect."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._confine.landlock import Boundary
from .._project.adapter import Task
from .._project.harness import harness_files
from .._project.spec import Spec
from .runner import AdapterRunner, Scored
from .sandbox_process import Ask, Sandbox, SandboxError
from .scratch import scratch_root
from .wire import ValueLoader, dumps

__all__ = ["Sandboxes", "SandboxError", "isolated"]

MAX_CHILDREN = 8  # live children per process; the least recently used idle one is ended first
RUN_DIR_NAME = ".capevolve"


def isolated(
    adapter: Any, ref: str, project_dir: Path, judge_rescores: int = 1, *, spec: Spec | None = None
) -> AdapterRunner:
    """The runner of ``adapter`` (loaded here from ``ref``, for tasks and scores) whose candidate
    side runs in sandbox children that load the same ``ref``, confined to the boundary of
    ``spec``'s project (without a spec: the run dir hidden, no gold)."""
    runner = AdapterRunner(adapter, judge_rescores)
    runner.targets = Sandboxes(ref, project_dir, harness_modules=[type(adapter).__module__], spec=spec)
    runner.targets.inline = not runner.is_async
    return runner


class Sandboxes:
    """The :attr:`.runner.AdapterRunner.targets` of an isolated runner: one :class:`Sandbox` per candidate
    folder, started on its first rollout."""

    def __init__(
        self, ref: str, project_dir: Path, *, harness_modules: list[str], spec: Spec | None = None
    ) -> None:
        self.ref = ref
        self.inline = True  # False: all in flight (an async run_target runs on the child's loop)
        self.project_dir = project_dir
        self.spec = spec
        self._fence: Fence | None = None
        # called once, on the main thread, right after the next inline answer is read (before it
        # is scored): how the item layer sends the next item's request ahead (:meth:`send_ahead`)
        self.after_answer: Callable[[], object] | None = None
        self._children: OrderedDict[str, Sandbox] = OrderedDict()
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._task_blobs: dict[str, tuple[Task, bytes | None]] = {}
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
        """The boundary's fixed part, made when the first child starts (it globs the gold files once)."""
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
                blob: bytes | None = dumps(task)
            except Exception:  # the child takes the same task from its own tasks("all")
                blob = None
            cached = self._task_blobs[task.id] = (task, blob)
        return (task.id, cached[1], str(candidate_dir), seed, split, timeout_s, logging.root.level, inline)

    def label_of(self, folder: Path) -> str | None:
        """The label of the child running ``folder``'s rollouts (None: none has said yet), for a
        rollout the scoring process's watchdog stopped (:mod:`.inflight`)."""
        with self._lock:
            sandbox = self._children.get(str(folder))
        return None if sandbox is None else sandbox.label

    def _label(self, scored: Scored, sandbox: Sandbox) -> None:
        """The child's confinement on its rollout; a confined child's refused write or read
        named as the boundary's, with the way on (``sandbox_writable``, ``TMPDIR``)."""
        scored.confinement = sandbox.label
        if scored.infra_error and sandbox.confinement is not None and sandbox.confinement.confined:
            scored.infra_error = self.fence().explain(scored.infra_error)

    def run(self, task: Task, folder: Path, *, seed: int, split: str, timeout_s: float | None) -> Scored:
        inline = self.inline and threading.current_thread() is threading.main_thread()
        ask = self._ask(task, folder, seed=seed, split=split, timeout_s=timeout_s, inline=inline)
        then, self.after_answer = self.after_answer, None
        sandbox = self._sandbox(folder)
        answer = sandbox.exchange(ask) if inline else sandbox.submit(ask).result()
        self._label(answer.scored, sandbox)
        if then is not None and inline:
            with contextlib.suppress(Exception):  # only a head start: the next item asks for it itself
                then()
        return answer.replay()

    def room(self, folder: Path) -> tuple[int, int]:
        """How many rollouts sent ahead ``folder``'s child holds (the next ones, in order), and how
        many more :meth:`send_all_ahead` may send it now."""
        with self._lock:
            sandbox = self._children.get(str(folder))
        return (0, 0) if sandbox is None else sandbox.room()

    def send_ahead(self, task: Task, folder: Path, *, seed: int, split: str, timeout_s: float | None) -> bool:
        """:meth:`send_all_ahead` for one rollout: False when it was not sent."""
        return self.send_all_ahead(folder, [(task, seed)], split=split, timeout_s=timeout_s) == 1

    def send_all_ahead(
        self, folder: Path, rollouts: list[tuple[Task, int]], *, split: str, timeout_s: float | None
    ) -> int:
        """On the main thread: send the rollouts (task, seed) :meth:`run` will be asked for next, in
        order, to ``folder``'s running child now, in one write, for each :meth:`run` to collect; how
        many were sent (the first ones: :meth:`.sandbox_process.Sandbox.send_ahead`)."""
        if threading.current_thread() is not threading.main_thread():
            return 0
        asks = [
            self._ask(task, folder, seed=seed, split=split, timeout_s=timeout_s, inline=True)
            for task, seed in rollouts
        ]
        with self._lock:
            sandbox = self._children.get(str(folder))
        return 0 if sandbox is None else sandbox.send_ahead(*asks)

    async def run_async(
        self, task: Task, folder: Path, *, seed: int, split: str, timeout_s: float | None
    ) -> Scored:
        ask = self._ask(task, folder, seed=seed, split=split, timeout_s=timeout_s, inline=False)
        sandbox = self._sandbox(folder)
        answer = await asyncio.wrap_future(sandbox.submit(ask))
        self._label(answer.scored, sandbox)
        return answer.replay()

    def close(self) -> None:
        """End and reap every child (idempotent), when the session or command ends; ``atexit``,
        the last resort, is dropped so a closed runner is not held until the process exits."""
        with self._lock:
            self._closed = True
            children = list(self._children.values())
            self._children.clear()
        atexit.unregister(self.close)
        for sandbox in children:
            sandbox.close()


# what a refused open, write or rename looks like in an infra error (EACCES, EPERM; EXDEV for a
# rename or link the boundary's folders do not both allow)
_REFUSED = re.compile(r"(?:PermissionError|OSError): \[Errno (?:13|1|18)\] [^:']*: '([^']*)'")


@dataclass(frozen=True)
class Fence:
    """The fixed part of every child's boundary for one project (the scratch and the candidate's
    folder are added per child)."""

    hidden: tuple[Path, ...]
    writable: tuple[Path, ...] = ()

    @classmethod
    def of_project(cls, project_dir: Path, spec: Spec | None = None) -> Fence:
        """The project's ``.capevolve/`` (its runs and its memory) hidden; with a spec, its gold
        files and shared ledger hidden too and its ``sandbox_writable`` (relative: to the
        project) granted."""
        # every child's scratch is inside scratch_root (its own granted to it): a sibling's is hidden
        hidden, writable = [project_dir / RUN_DIR_NAME, scratch_root()], list[Path]()
        if spec is not None:
            hidden += harness_files(project_dir, spec.harness_files, exclude=[spec.capability_path])
            hidden += [spec.shared_ledger] if spec.shared_ledger is not None else []
            writable = [project_dir / Path(p).expanduser() for p in spec.sandbox_writable]
        absolute = (Path(os.path.abspath(p)) for p in hidden)
        return cls(tuple(dict.fromkeys(absolute)), tuple(Path(os.path.abspath(p)) for p in writable))

    @classmethod
    def of_spec(cls, spec: Spec) -> Fence:
        return cls.of_project(spec.project_dir, spec)

    def explain(self, infra_error: str) -> str:
        """``infra_error`` with the way on added when it is a refusal of this boundary (a
        ``PermissionError`` naming a path), for a confined child's rollout."""
        refused = _REFUSED.search(infra_error)
        if refused is None:
            return infra_error
        path = Path(os.path.abspath(refused.group(1)))
        if any(path == hidden or hidden in path.parents for hidden in self.hidden):
            return (
                f"{infra_error} (candidate code runs confined and {path} is hidden from it: the run dir and "
                "gold files (harness_files) are read by tasks() and score(), never from live() or run_target)"
            )
        for folder in self.writable:
            if path == folder or folder in path.parents:
                if folder.is_dir():
                    return infra_error  # granted: refused by the file's own mode, not the boundary
                return (
                    f"{infra_error} (candidate code runs confined: the spec's sandbox_writable names "
                    f"{folder}, which does not exist, so nothing was granted; create it before the session)"
                )
        named = ", ".join(str(p) for p in self.writable) or "none yet"
        return (
            f"{infra_error} (candidate code runs confined: live() and run_target may write only their TMPDIR "
            f"and the folders the spec's sandbox_writable names ({named}); name the folder it writes in "
            "sandbox_writable in capevolve.yaml (create it first; the changed spec starts a new run, "
            "--capevolve-new-run), or write scratch files under TMPDIR)"
        )

    def boundary(self, candidate_dir: Path, scratch: Path) -> Boundary:
        """This fence around one child: ``scratch`` writable, ``candidate_dir`` readable even inside
        the hidden run dir; ValueError when a ``sandbox_writable`` folder holds or lies inside a
        hidden one (granting it would open what the boundary hides)."""
        for folder in self.writable:
            real = Path(os.path.realpath(folder))
            for hidden in self.hidden:
                shut = Path(os.path.realpath(hidden))
                if real == shut or real in shut.parents or shut in real.parents:
                    raise ValueError(
                        f"the spec's sandbox_writable names {folder}, which "
                        f"{'holds' if real in shut.parents else 'is or lies inside'} {hidden}, hidden from "
                        "candidate code; name a folder of its own for what live() writes (e.g. .agent/skills)"
                    )
        writable, readable = (scratch, *self.writable), (Path(os.path.abspath(candidate_dir)),)
        return Boundary(
            writable=writable, readable=readable, hidden=self.hidden, read_all=True, bind_tcp=False
        )
