"""The adapter contract: how capevolve talks to a user's agent, task set and scorer.

A user writes one class with three methods::

    tasks(split)                      -> list[Task]   # the evaluation data ("all" = the pool)
    run_target(task, ctx, *, seed)    -> Rollout      # run the agent once; never score here
    score(task, rollout)              -> Score        # reward in [0, 1] plus feedback

and optionally ``live(candidate_dir)``, yielding the ``ctx`` handed to ``run_target`` (default:
the candidate dir), and ``thread_safe = False`` (docs/reference/adapter.md). The types accept
cap-evolve's keywords, and its ``run_target(task, dir, split)`` and ``apply(dir)`` are honoured
(:class:`.._engine.runner.AdapterRunner`).

A project's own files are never loaded from bytecode, only compiled from their locked source: a
planted ``__pycache__`` ``.pyc`` copying the source's mtime and size would run in place of the
locked adapter, unseen by the harness lock and the snapshot hash. So Python's source loader
neither reads nor writes a cache under the :func:`source_only` folders, and :func:`purge` empties
the project's ``__pycache__`` folders (pytest's rewritten conftests keep their own) before a
session. Everything else keeps Python's cache (a cache per process cost 6.4 s → 14.3 s to import
inspect_ai and openai)."""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import inspect
import io
import math
import numbers
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..exitcodes import CapevolveError
from . import startup_hooks

REQUIRED_METHODS = ("tasks", "run_target", "score")
POOL_SPLIT = "all"


class AdapterError(CapevolveError):
    """The user's adapter broke the contract; the message names the file, method and fix."""


@dataclass
class Task:
    """One unit of evaluation data."""

    id: str
    input: Any = None
    target: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rollout:
    """One run of the agent on one task. ``error`` set means the rollout did not measure the
    agent (timeout, crash, API down): it is missing data, never a reward of 0."""

    task_id: str = ""
    output: Any = None
    trace: Any = None
    error: str | None = None
    cost_usd: float = 0.0
    tokens: int = 0
    seconds: float = 0.0
    tool_calls: list[Any] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Score:
    """A scored rollout. ``reward`` must lie in [0, 1]; it is validated, never clamped."""

    reward: float
    feedback: str = ""
    metrics: Any = None
    task_id: str = ""
    # accepted for cap-evolve compatibility; capevolve aggregates trials itself
    n: int = 1
    stderr: float = 0.0
    trial_rewards: list[float] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)


class CapabilityAdapter:
    """Optional base class; any object with the three methods satisfies the contract."""

    def tasks(self, split: str) -> list[Task]:
        raise NotImplementedError("IMPLEMENT ME: tasks(split)")

    def run_target(self, task: Task, ctx: Any, *, seed: int) -> Rollout:
        raise NotImplementedError("IMPLEMENT ME: run_target(task, ctx, *, seed)")

    def score(self, task: Task, rollout: Rollout) -> Score:
        raise NotImplementedError("IMPLEMENT ME: score(task, rollout)")


def check_reward(value: Any, where: str) -> float:
    """Return ``value`` as a float in [0, 1] or raise an AdapterError saying what was wrong."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AdapterError(f"{where}: reward must be a number in [0, 1], got {value!r}")
    reward = float(value)
    if math.isnan(reward) or not 0.0 <= reward <= 1.0:
        raise AdapterError(
            f"{where}: reward must lie in [0, 1], got {reward!r}; "
            "fix the scorer (capevolve never clamps a reward)"
        )
    return reward


# A cost above it is a unit slip (micro-dollars, tokens), and near 1e308 would sum to infinity.
MAX_COST_USD = 1e6


def check_cost(value: Any, where: str) -> float:
    """A rollout's ``cost_usd`` as a finite float ≥ 0, else an AdapterError: a NaN would make
    ``max_usd`` stop nothing, a negative cost would give spend back."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AdapterError(f"{where}: cost_usd must be a number ≥ 0, got {_shown(value)}")
    cost = float(value)
    if not (math.isfinite(cost) and 0.0 <= cost <= MAX_COST_USD):
        raise AdapterError(
            f"{where}: cost_usd must be a finite number from 0 to {MAX_COST_USD:g} USD (more is a unit "
            f"slip), got {cost!r}; fix the adapter's run_target"
        )
    return cost


def check_tokens(value: Any, where: str) -> int:
    """A rollout's ``tokens`` as an int ≥ 0, else an AdapterError (as :func:`check_cost`)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 0:
        raise AdapterError(f"{where}: tokens must be a whole number ≥ 0, got {_shown(value)}; fix run_target")
    return int(value)


def load_adapter(ref: str, project_dir: Path, *, note_startup_hooks: bool = True) -> Any:
    """Import ``file.py:Class`` relative to ``project_dir`` and instantiate it."""
    source_only(project_dir)  # a .pyc planted beside the adapter or a candidate is never loaded
    if note_startup_hooks:
        startup_hooks.remember()  # before any sandbox child of this process runs candidate code
    file_part, _, class_name = ref.partition(":")
    path = (project_dir / file_part).resolve()
    if not path.is_file():
        raise AdapterError(f"adapter file {path} does not exist (spec key 'adapter': {ref!r})")
    module_name = "capevolve_adapter_" + "_".join(p for p in path.with_suffix("").parts if p.isidentifier())
    if str(path.parent) not in sys.path:
        # its own folder is importable, so it can import modules beside it (cap-evolve's
        # adapters do: `import model_config`); appended, so it shadows nothing installed
        sys.path.append(str(path.parent))
    module = sys.modules.get(module_name)
    if module is None or getattr(module, "__file__", None) != str(path):
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[module_name]
            raise AdapterError(f"importing adapter {path} failed: {exc!r}") from exc
    cls = getattr(module, class_name, None)
    if cls is None:
        found = sorted(n for n, v in vars(module).items() if inspect.isclass(v))
        raise AdapterError(f"adapter {path} has no class {class_name!r} (classes there: {', '.join(found)})")
    try:
        params = inspect.signature(cls).parameters
        instance = cls(project_dir=project_dir) if "project_dir" in params else cls()
    except Exception as exc:
        raise AdapterError(f"creating adapter {ref} failed: {exc!r}") from exc
    missing = [name for name in REQUIRED_METHODS if not callable(getattr(instance, name, None))]
    if missing:
        raise AdapterError(
            f"adapter {ref} ({path}) lacks required method(s) {', '.join(missing)}; "
            "implement tasks(split), run_target(task, ctx, *, seed) and score(task, rollout)"
        )
    return instance


def coerce_task(raw: Any, where: str) -> Task:
    """Accept our Task, a cap-evolve Task (same attributes) or a plain dict with an ``id``."""
    if isinstance(raw, Task):
        return raw
    if isinstance(raw, dict) and "id" in raw:
        given = raw
    elif hasattr(raw, "id"):
        given = {name: getattr(raw, name, None) for name in ("id", "input", "target", "metadata")}
    else:
        raise AdapterError(f"{where}: a task must be a Task or a dict with an 'id', got {raw!r}")
    metadata = dict(given.get("metadata") or {})
    return Task(id=str(given["id"]), input=given.get("input"), target=given.get("target"), metadata=metadata)


def load_tasks(adapter: Any, ref: str) -> dict[str, Task]:
    """The task pool (``tasks("all")``) keyed by id; duplicates and emptiness are errors."""
    where = f"adapter {ref}: tasks({POOL_SPLIT!r})"
    try:
        returned = adapter.tasks(POOL_SPLIT)
    except NotImplementedError as exc:
        raise AdapterError(f"{where} is not implemented: {exc}") from None
    except Exception as exc:
        raise AdapterError(f"{where} raised {type(exc).__name__}: {exc}; fix the adapter's tasks()") from None
    if isinstance(returned, (str, bytes, dict)) or not isinstance(returned, Iterable):
        raise AdapterError(f"{where} must return a list of tasks, got {_shown(returned)}")
    try:
        raw = list(returned)
    except Exception as exc:
        raise AdapterError(f"{where} raised {type(exc).__name__} while listing tasks: {exc}") from None
    pool: dict[str, Task] = {}
    for item in raw:
        task = with_str_id(coerce_task(item, where), where)
        if task.id in pool:
            raise AdapterError(f"{where} returned the task id {task.id!r} twice; ids must be unique")
        if not task.id:
            raise AdapterError(f"{where} returned a task with an empty id")
        pool[task.id] = task
    if not pool:
        raise AdapterError(f"{where} returned no tasks; there is nothing to evaluate")
    return pool


def with_str_id(task: Task, where: str) -> Task:
    """Task ids are strings everywhere (file names, splits.json, reports): a whole-number id
    such as ``Task(id=0)`` is read as ``"0"``; any other type is refused with one line."""
    if isinstance(task.id, str):
        return task
    if isinstance(task.id, int) and not isinstance(task.id, bool):
        return replace(task, id=str(task.id))
    raise AdapterError(
        f"{where} returned a task whose id {task.id!r} is a {type(task.id).__name__}; "
        "a task id is a string (or a whole number, read as one)"
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'…' if len(text) > 60 else ''}"


def coerce_rollout(result: Any, task_id: str) -> Rollout:
    if isinstance(result, Rollout):
        return result
    if hasattr(result, "output"):
        return Rollout(
            task_id=str(getattr(result, "task_id", task_id) or task_id),
            output=result.output,
            trace=getattr(result, "trace", None),
            error=getattr(result, "error", None),
            cost_usd=getattr(result, "cost_usd", 0.0),  # checked with the rollout (runner)
            tokens=getattr(result, "tokens", 0),  # checked with the rollout (runner), as the cost
            tool_calls=list(getattr(result, "tool_calls", None) or []),
            metadata=dict(getattr(result, "metadata", None) or {}),
        )
    raise AdapterError(f"run_target({task_id!r}) must return a Rollout, got {result!r}")


# -- never bytecode for a project's own files (see the module docstring) --------------------------

_roots: set[str] = set()  # resolved folders, each ending in os.sep
_BYTECODE = tuple(importlib.machinery.BYTECODE_SUFFIXES)
# folders under a project that hold no project code: a VCS, environments, tool caches
_NOT_PROJECT_CODE = frozenset({".capevolve", ".git", ".hg", ".tox", ".nox", "node_modules"})
_FD_PATHS = "/proc/self/fd"  # where the kernel names each open file by its resolved path (Linux)


def under_a_root(filename: str) -> bool:
    resolved = os.path.realpath(filename)
    return any(resolved.startswith(root) for root in _roots)


def _read_outside_roots(filename: str) -> bytes:
    """The bytes of ``filename``, checked by the path the kernel resolved when it opened the file
    (the very file read; one readlink, where ``realpath`` costs a lstat per folder: 50 µs for each
    of the ~300 modules a session imports)."""
    with io.open_code(str(filename)) as file:
        resolved = os.readlink(f"{_FD_PATHS}/{file.fileno()}")
        if any(resolved.startswith(root) for root in _roots):
            raise OSError("a project file's bytecode is never read")  # the loader compiles the source
        return file.read()


def _wrap_source_loader() -> None:
    loader = importlib.machinery.SourceFileLoader
    if getattr(loader, "_capevolve_source_only", False):
        return
    read, write = loader.get_data, loader.set_data
    by_descriptor = os.path.isdir(_FD_PATHS)

    def get_data(self: Any, path: str) -> bytes:
        if not path.endswith(_BYTECODE):
            return read(self, path)
        if by_descriptor:
            return _read_outside_roots(path)
        if under_a_root(path):
            raise OSError("a project file's bytecode is never read")  # the loader compiles the source
        return read(self, path)

    def set_data(
        self: importlib.machinery.SourceFileLoader, path: str, data: bytes, *, _mode: int = 0o666
    ) -> None:
        if under_a_root(path):
            return None  # nor written beside it
        return write(self, path, data, _mode=_mode)

    loader.get_data = get_data  # type: ignore[method-assign]
    loader.set_data = set_data  # type: ignore[method-assign,assignment]
    loader._capevolve_source_only = True  # type: ignore[attr-defined]


def source_only(*folders: Path) -> None:
    """Compile every module under ``folders`` from its source from now on (idempotent)."""
    for folder in folders:
        _roots.add(os.path.join(os.path.realpath(folder), ""))
    _wrap_source_loader()


def purge(project_dir: Path) -> int:
    """Delete the bytecode in the project's ``__pycache__`` folders; the number deleted."""
    removed = 0
    for here, dirs, files in os.walk(project_dir):
        dirs[:] = [
            d
            for d in dirs
            if d not in _NOT_PROJECT_CODE and not os.path.isfile(os.path.join(here, d, "pyvenv.cfg"))
        ]
        if os.path.basename(here) != "__pycache__":
            continue
        for name in files:
            if name.endswith(_BYTECODE):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(here, name))
                    removed += 1
    return removed
