"""The evaluation kind (the default): measure the candidates and, with ``--capevolve-gate``, gate them.

Controller only. Every kind that plans does so under the project's lock and the run's (:func:`plan_locked`),
so sessions started together get one run and never pay twice."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import pytest

from ..._store.rundir import RunDir
from ..outcome import SessionHooks
from .base import HARNESS_NOW, TASK_KEYS_NOW, Started, indexed
from .options import candidate_requests, gate_request

if TYPE_CHECKING:
    from ..._project.spec import Spec
    from ..evaluation import EvaluationSession
    from ..persistence import Persistence
    from ..planning import Planned
    from ..refusals import Screens

P = TypeVar("P", bound="Planned")
E = TypeVar("E", bound="EvaluationSession")


def plan_locked(
    config: pytest.Config, spec: Spec, plan: Callable[[RunDir, Screens], P], *, microcases: bool = True
) -> tuple[P, RunDir, Screens, Persistence]:
    """Run ``plan`` under the locks (a refused plan releases its claims and leaves no empty run); the
    persistence of the plan."""
    from ..persistence import Persistence
    from ..refusals import Screens

    option = config.option
    with RunDir.project_lock(spec.project_dir):
        rundir = RunDir.resolve(spec.project_dir, option.capevolve_run_id, option.capevolve_new_run)
        screens = Screens(spec, rundir, microcases=microcases)
        config.add_cleanup(screens.close)  # its microcase checks' sandbox children
        try:
            with rundir.lock():
                planned = plan(rundir, screens)
        except BaseException:
            rundir.claims.release()
            rundir.discard_if_created()
            raise
    persistence = Persistence(config, spec, rundir, planned)
    return planned, rundir, screens, persistence


def start_gated(
    config: pytest.Config, spec: Spec, pool_ids: list[str], split: str, session: type[E]
) -> tuple[E, Planned, Persistence, RunDir]:
    """An evaluation (or gate) planned and its ``session`` role built on the plan: (role, plan, its
    persistence, the run)."""
    from ..evaluation import preferences_judge
    from ..planning import plan_evaluation
    from .finalize import test_reused_asked

    option = config.option
    gate = gate_request(config, split, spec)
    requests = candidate_requests(config, spec)

    def plan(rundir: RunDir, screens: Screens) -> Planned:
        if gate.enabled:
            from ..grow import refuse_regating_grown

            refuse_regating_grown(spec, rundir, [r.tag for r in requests])
        return plan_evaluation(
            spec,
            rundir,
            pool_ids,
            requests,
            split,
            rerun=option.capevolve_rerun,
            gate=gate,
            screens=screens,
            block=option.capevolve_block,
            harness_now=config.stash.get(HARNESS_NOW, None),
            task_keys_now=config.stash.get(TASK_KEYS_NOW, None),
            test_reused=test_reused_asked(config),
        )

    planned, rundir, screens, persistence = plan_locked(config, spec, plan, microcases=gate.enabled)
    role = session(
        spec,
        rundir,
        planned,
        gate,
        screens.refusals,
        persistence,
        explain=option.capevolve_explain,
        hooks=SessionHooks(config),
        prefer=preferences_judge(config, rundir),
    )
    return role, planned, persistence, rundir


class EvaluateKind:
    """``pytest --capevolve-run PROJECT [--capevolve-candidate DIR ...] [--capevolve-gate]``."""

    name = "evaluate"

    def asked(self, config: pytest.Config, split: str) -> bool:
        return True  # the default: last in the table

    def start(self, config: pytest.Config, spec: Spec, pool_ids: list[str], split: str) -> Started:
        from ..evaluation import EvaluationSession

        role, planned, persistence, rundir = start_gated(config, spec, pool_ids, split, EvaluationSession)
        return Started(role, planned, persistence, rundir, indexed(rundir, planned))
