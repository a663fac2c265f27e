"""Candidate code runs in a sandbox child; the process that scores never imports it.

:func:`isolated` builds an adapter's runner whose ``live()``/``apply()`` + ``run_target`` half
runs in a child process (:mod:`.sandbox_child`, driven by :mod:`.sandbox_process`): a fresh
interpreter, never a fork, one per candidate folder, so one candidate's code reaches neither the
scorer nor another candidate's rollouts. The rollout comes back as data (:mod:`.wire`) and is
scored here; what it printed and logged is replayed here, so reports keep their sections. A
child that dies, hangs past its deadline or answers garbage ends its rollouts as the
candidate's failures (:mod:`.sandbox_answer`): a death it chose is never missing data a later
session pays again. At concurrency 1 the next item's request may be sent ahead
(:meth:`Sandboxes.send_ahead`), so the child runs it while this process scores the current one.

See docs/explanation/candidate-isolation.md for what this does and does not protect.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._project.adapter import Task
from .._project.spec import Spec
from .runner import AdapterRunner, Scored
from .sandbox_boundary import Fence
from .sandbox_process import Ask, Sandbox, SandboxError
from .wire import ValueLoader

__all__ = ["Sandboxes", "SandboxError", "isolated"]

MAX_CHILDREN = 8  # live children per process; the least recently used idle one is ended first


def isolated(
    adapter: Any, ref: str, project_dir: Path, judge_rescores: int = 1, *, spec: Spec | None = None
) -> AdapterRunner:
    """The runner of ``adapter`` (loaded here from ``ref``, for tasks and scores) whose candidate
    side runs in sandbox children that load the same ``ref``, confined to the boundary of
    ``spec``'s project (without a spec: the run dir hidden, no gold)."""
    runner = AdapterRunner(adapter, judge_rescores)
    runner.targets = Sandboxes(ref, project_dir, harness_modules=[type(adapter).__module__], spec=spec)
    return runner


class Sandboxes:
    """The :class:`.runner.Targets` of an isolated runner: one :class:`Sandbox` per candidate
    folder, started on its first rollout."""

    def __init__(
        self, ref: str, project_dir: Path, *, harness_modules: list[str], spec: Spec | None = None
    ) -> None:
        self.ref = ref
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
            with contextlib.suppress(Exception):  # only a head start: the next item asks for it itself
                then()
        answer.replay()
        return answer.scored

    def send_ahead(
        self, task: Task, candidate_dir: Path, *, seed: int, split: str, timeout_s: float | None
    ) -> bool:
        """On the main thread: send the rollout :meth:`run` will be asked for next to its running,
        idle child now, for that :meth:`run` to collect; False when nothing was sent."""
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
        """End and reap every child (idempotent), when the session or command ends; ``atexit``,
        the last resort, is dropped so a closed runner is not held until the process exits."""
        with self._lock:
            self._closed = True
            children = list(self._children.values())
            self._children.clear()
        atexit.unregister(self.close)
        for sandbox in children:
            sandbox.close()
