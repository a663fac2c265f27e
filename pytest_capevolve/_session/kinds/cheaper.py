"""The kinds that buy cheaper evidence than a gate on full val (controller only): the subset screen
(``--capevolve-screen TIER``: the candidate on a subset of val, killed
early or promoted to a gate, :mod:`..subset_screen`) and grow (``--capevolve-grow TAG``: more trials for an
undecided candidate, judged again at the next look of its α schedule, :mod:`..grow`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ..outcome import SessionHooks
from .base import Started, indexed
from .evaluate import plan_locked
from .options import candidate_requests, cheaper_evidence, commit_mode, refuse_pairwise

if TYPE_CHECKING:
    from ..._project.spec import Spec


class ScreenKind:
    name = "screen"

    def asked(self, config: pytest.Config, split: str) -> bool:
        return cheaper_evidence(config, split) == "screen"

    def start(self, config: pytest.Config, spec: Spec, pool_ids: list[str], split: str) -> Started:
        from ..subset_screen import ScreenRequest, ScreenSession, plan_screen

        refuse_pairwise(spec, "--capevolve-screen")
        candidate = candidate_requests(config, spec)[0]
        commit = commit_mode(config)
        request = ScreenRequest(config.option.capevolve_screen)
        planned, rundir, screens, persistence = plan_locked(
            config,
            spec,
            lambda rundir, screens: plan_screen(spec, rundir, pool_ids, candidate, request, screens),
        )
        role = ScreenSession(
            spec, rundir, planned, screens.refusals, persistence, commit, SessionHooks(config)
        )
        return Started(role, planned, persistence, rundir, indexed(rundir, planned))


class GrowKind:
    name = "grow"

    def asked(self, config: pytest.Config, split: str) -> bool:
        return cheaper_evidence(config, split) == "grow"

    def start(self, config: pytest.Config, spec: Spec, pool_ids: list[str], split: str) -> Started:
        from ..grow import GrowSession, plan_grow

        refuse_pairwise(spec, "--capevolve-grow")
        option = config.option
        commit = commit_mode(config)
        planned, rundir, _, persistence = plan_locked(
            config, spec, lambda rundir, _: plan_grow(spec, rundir, pool_ids, option.capevolve_candidate[0])
        )
        veto = bool(option.capevolve_veto_regressions)
        role = GrowSession(spec, rundir, planned, persistence, commit, veto, SessionHooks(config))
        return Started(role, planned, persistence, rundir, indexed(rundir, planned))
