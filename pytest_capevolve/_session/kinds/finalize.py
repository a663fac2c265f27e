"""The finalize kind: ``pytest --capevolve-finalize PROJECT`` scores the test split once.

Controller only. The seal is claimed before anything is planned, so a refused finalize pays
nothing and writes nothing (:mod:`..finalize` concludes it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ..._store.rundir import RunDir
from .base import Started

if TYPE_CHECKING:
    from ..._project.spec import Spec


class FinalizeKind:
    """``--capevolve-finalize``: first in the table (it ignores the evaluation's flags)."""

    name = "finalize"

    def asked(self, config: pytest.Config, split: str) -> bool:
        return bool(config.option.capevolve_finalize)

    def start(self, config: pytest.Config, spec: Spec, pool_ids: list[str], split: str) -> Started:
        from ..._store.seal import Seal
        from ..finalize import FinalizeSession
        from ..persistence import Persistence
        from ..planning import plan_finalize

        rundir = RunDir.resolve(spec.project_dir, config.option.capevolve_run_id, create=False)
        seal = Seal(rundir)
        seal.claim()  # before anything is planned: a refused finalize pays and writes nothing
        try:
            planned = plan_finalize(spec, rundir, pool_ids, seal)
        except BaseException:
            seal.release()
            raise
        persistence = Persistence(config, spec, rundir, planned.plan)
        role = FinalizeSession(config, spec, rundir, planned, seal, persistence)
        return Started(role, planned, persistence, rundir, seal.test_rollouts)
