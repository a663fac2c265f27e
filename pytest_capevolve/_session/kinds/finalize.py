"""The finalize kind: ``pytest --capevolve-finalize PROJECT`` scores the test split once.

Controller only. The seal is claimed before planning, so a refused finalize pays and writes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ..._store.memory import task_keys
from ..._store.rundir import RunDir
from .base import TASK_KEYS_NOW, Started

if TYPE_CHECKING:
    from ..._project.spec import Spec


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
        refuse_partial(config, rundir.run_id)  # before the claim: a refused finalize writes nothing
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
        persistence = Persistence(config, spec, rundir, planned.plan)
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
