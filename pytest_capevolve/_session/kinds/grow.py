"""The grow kind (``--capevolve-grow TAG``): more trials for an undecided candidate, judged again at the
next look of its α schedule (:mod:`..grow`). Controller only."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ..outcome import SessionHooks
from .base import Started, indexed
from .evaluate import plan_locked
from .options import cheaper_evidence, commit_mode, refuse_pairwise

if TYPE_CHECKING:
    from ..._project.spec import Spec


class GrowKind:
    name = "grow"

    def asked(self, config: pytest.Config, split: str) -> bool:
        return cheaper_evidence(config, split) == "grow"

    def start(self, config: pytest.Config, spec: Spec, pool_ids: list[str], split: str) -> Started:
        from ..grow import GrowSession, plan_grow
        from ..persistence import Persistence

        refuse_pairwise(spec, "--capevolve-grow")
        option = config.option
        commit = commit_mode(config)
        planned, rundir, _ = plan_locked(
            config, spec, lambda rundir, _: plan_grow(spec, rundir, pool_ids, option.capevolve_candidate[0])
        )
        persistence = Persistence(config, spec, rundir, planned.plan, waiting_on=planned.waiting_on)
        veto = bool(option.capevolve_veto_regressions)
        role = GrowSession(spec, rundir, planned, persistence, commit, veto, SessionHooks(config))
        return Started(role, planned, persistence, rundir, indexed(rundir, planned))
