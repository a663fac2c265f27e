"""The two kinds a session flag names: evaluation (the default, ``--capevolve-run``: measure the candidates
and, with ``--capevolve-gate``, gate them) and finalize (``--capevolve-finalize``: score the test split once).

Controller only. Every kind that plans does so under the project's lock and the run's (:func:`plan_locked`),
so sessions started together get one run and never pay twice; a finalize claims the seal before planning, so
a refused finalize pays and writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import pytest

from ..._store.memory import task_keys
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
        except BaseException as refusal:
            rundir.claims.release()
            rundir.discard_if_created(refusal)
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


class FinalizeKind:
    """``--capevolve-finalize``: first in the table (it ignores the evaluation's flags)."""

    name = "finalize"

    def asked(self, config: pytest.Config, split: str) -> bool:
        return bool(config.option.capevolve_finalize)

    def start(self, config: pytest.Config, spec: Spec, pool_ids: list[str], split: str) -> Started:
        from ..._store.memory.seal import Seal
        from ..finalize import FinalizeSession
        from ..persistence import Persistence
        from ..planning import plan_finalize
        from ..selection import refuse_partial

        rundir = RunDir.resolve(spec.project_dir, config.option.capevolve_run_id, create=False)
        # before the claim: a refused finalize writes nothing
        refuse_partial(config, rundir.run_id, rundir.project_dir)
        seal = Seal(rundir)
        seal.claim()  # before anything is planned: a refused finalize pays and writes nothing
        try:
            task_keys.ensure_recorded(rundir, config.stash.get(TASK_KEYS_NOW, None), rundir.splits() or {})
            reused = _reused_test(config, spec, rundir)
            planned = plan_finalize(spec, rundir, pool_ids, seal)
            seal.open(planned.plan.task_ids)  # before the first test rollout: gating ends here
        except BaseException:
            seal.release()
            raise
        persistence = Persistence(config, spec, rundir, planned)
        role = FinalizeSession(config, spec, rundir, planned, seal, persistence, test_reused=reused)
        return Started(role, planned, persistence, rundir, seal.test_rollouts)


def _reused_test(config: pytest.Config, spec: Spec, rundir: RunDir) -> list[tuple[str, list[str]]] | None:
    """Other runs that scored some of this run's test tasks or decided on a val holding them (by id or
    content): refused unless ``--capevolve-test-reused``; None when fresh."""
    from ..._policy.repeats.identity import decided_on
    from ..._project.splits import TestSealError
    from ..._store.memory.project_seal import REUSED_LABEL, overlaps, reused_line
    from ..._store.memory.shared_ledger import of_run

    test_ids = list((rundir.splits() or {}).get("test", []))
    keys, ledger = task_keys.recorded(rundir), of_run(rundir)
    found = overlaps(spec.project_dir, rundir.run_id, test_ids, keys, ledger) if test_ids else []
    decided = decided_on(spec.project_dir, rundir.run_id, test_ids, keys, ledger) if test_ids else []
    if not found and not decided:
        return None
    if not test_reused_asked(config):
        raise TestSealError(reused_line(rundir.run_id, found, decided))
    from ..junit import TEST_REUSED

    config.stash[TEST_REUSED] = REUSED_LABEL
    return found + decided


def test_reused_asked(config: pytest.Config) -> bool:
    if config.option.capevolve_test_reused:
        return True
    return str(config.getini("capevolve_test_reused")).strip().lower() in ("1", "true", "yes")
