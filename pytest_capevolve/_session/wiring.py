"""Starting a capevolve session: the spec, the adapter, the plan, and the roles registered.

From ``pytest_configure``, only when a ``--capevolve-*`` session was asked for (a plain run imports none of
this, nor numpy). The controller plans and registers the roles (:mod:`.starting`, imported there
only); an xdist worker reads the plan, and imports neither the session kinds nor numpy."""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Any

import pytest

from .._confine.launch import CONFINEMENT_ENV
from .._engine.budget_share import Headroom, share_for
from .._engine.candidate_bytes import worker_target
from .._engine.judging import require_prefer
from .._engine.runner import AdapterRunner, declared_thread_safe
from .._engine.sandbox import isolated
from .._items.nodes import CONTEXT_KEY, EvalContext
from .._items.plan import WORKERINPUT_KEY, EvalPlan
from .._project.adapter import AdapterError, load_adapter, load_tasks
from .._project.spec import Spec, load_spec
from .._project.splits import TestSealError
from .._project.way_on import pasteable
from .._store.files import collection_paused
from .._store.sessions.markers import ControllerWatch
from ..exitcodes import CapevolveError
from . import selection
from .perf import fanout, lean_protocol, retention


def brokered(config: pytest.Config) -> str:
    return shlex.join(["capevolve", "pytest", *map(str, config.invocation_params.args)])


def refuse_inside_boundary(config: pytest.Config) -> None:
    """Inside ``capevolve agent`` the kernel keeps the record out of reach: name the command that works
    (exit 4); where the variable was dropped, the first refused write says it (:func:`refused_write`)."""
    if CONFINEMENT_ENV in os.environ:
        raise pytest.UsageError(
            "this session runs inside the optimizer's boundary (capevolve agent), where the record "
            f"cannot be written; run it through the broker: {brokered(config)}"
        )


def refused_write(config: pytest.Config, exc: PermissionError) -> pytest.UsageError:
    where = f"{exc.filename}: " if exc.filename else ""
    return pytest.UsageError(
        f"this session cannot write the record ({where}{exc.strerror or exc}); inside capevolve "
        f"agent, run it through the broker: {brokered(config)}"
    )


@collection_paused()  # the plan of a large run: tens of thousands of rows and keys, no cycles
def configure(config: pytest.Config, target: str, *, split: str, ini: dict[str, str]) -> None:
    workerinput = getattr(config, "workerinput", None)
    on_copy = False
    given = list(config.args)  # the positional arguments: a rollout's node id selects it
    selected: list[str] = []
    try:
        if workerinput is not None:
            local = worker_target(workerinput, target)
            on_copy, target = local != target, local
        spec = load_spec(target, ini)
        adapter = load_adapter(spec.adapter, spec.project_dir)
        pool = load_tasks(adapter, spec.adapter)
        require_prefer(adapter, spec.adapter, spec.gate_mode)
        # candidate code: a child's, confined
        runner = isolated(adapter, spec.adapter, spec.project_dir, spec.judge_rescores, spec=spec)
        config.add_cleanup(runner.close)
        width = fanout_width(config, spec, runner)  # refused before anything is planned or paid
        if workerinput is not None:
            plan = EvalPlan.from_wire(json.loads(workerinput[WORKERINPUT_KEY]))
            selected = json.loads(str(workerinput.get(selection.WORKERINPUT_KEY) or "[]"))
        else:  # the controller's part, and what only it imports (the kinds, numpy)
            from .starting import start_controller

            spec, plan, selected = start_controller(config, spec, pool, split=split, given=given)
    except TestSealError as exc:
        raise pytest.UsageError(
            f"TestSealError: {pasteable(str(exc), args=config.invocation_params.args)}"
        ) from None
    except PermissionError as exc:  # inside the optimizer's boundary, its variable dropped
        raise refused_write(config, exc) from None
    except CapevolveError as exc:  # the one root: a refusal before anything is planned or paid
        raise pytest.UsageError(pasteable(str(exc), args=config.invocation_params.args)) from None
    except KeyboardInterrupt:  # Ctrl-C here, before the session starts: pytest exits 2 saying nothing
        if workerinput is None:
            # to stderr: the terminal reporter is not there yet; pytest's capture hands it on as it stops
            sys.stderr.write(
                "capevolve: interrupted while the session started, before any rollout ran; nothing was "
                f"paid: {shlex.join(['pytest', *config.invocation_params.args])} starts it again\n"
            )
        raise
    context = EvalContext(spec, plan, runner, pool, on_copy=on_copy)
    if workerinput is not None and plan.pool_digest and pool_digest(pool) != plan.pool_digest:
        context.pool_problem = (
            f"tasks() gave this worker other tasks than the controller ({len(pool)} here, "
            f"{len(plan.task_ids)} planned of the controller's): tasks() must return the same "
            "tasks in every process (seed what it draws); nothing was paid on this worker"
        )
    context.budget = share_for(Headroom.from_wire(plan.budget))
    if workerinput is not None and plan.live:
        from .._store.rundir import RUNS_DIR

        context.watch = ControllerWatch(spec.project_dir / RUNS_DIR / plan.run_id, plan.live)
    config.stash[CONTEXT_KEY] = context
    retention.register(config)  # every process: its items and reports kept lean, its heap frozen
    lean_protocol.register(config)  # every process runs its rollout items the lean way
    fanout.register(config, context, width)  # rollouts in flight, or the next request sent ahead
    # the spec is the only thing a capevolve session collects: the rollouts named under it, else all
    # (a worker gets the controller's choice, not argv's)
    config.args[:] = [f"{spec.path}::{rest}" for rest in selected] or [str(spec.path)]


def pool_digest(pool: dict[str, Any]) -> str:
    from .._project import harness

    return harness.tasks_digest(pool[task_id] for task_id in sorted(pool))


def fanout_width(config: pytest.Config, spec: Spec, runner: AdapterRunner) -> int:
    """Rollouts in flight per process: --capevolve-concurrency, else the spec's ``concurrency``; refused
    above 1 for an adapter that is not thread-safe."""
    flag = config.option.capevolve_concurrency
    width = int(flag or spec.concurrency)
    if not declared_thread_safe(runner.adapter) and width > 1:
        asked = (
            f"--capevolve-concurrency {width}"
            if flag
            else f"concurrency {width} (from {spec.path.name}'s concurrency, or capevolve_concurrency ini)"
        )
        raise AdapterError(
            f"{asked}: adapter {spec.adapter} is not thread-safe (it declares "
            "thread_safe = False, or makes candidates live with apply()); run it with "
            "--capevolve-concurrency 1 and fan out with -n N workers instead"
        )
    return width
