"""The sequential-gate kind (``--capevolve-gate --capevolve-sequential``): a gate that stops
paying for a tag once its e-process decides it.

Controller only. Planned as a gate session (:func:`.evaluate.plan_gated`); the live role
:class:`..sequential_gate.SequentialGate` is registered after persistence (it sees the saved
rollouts) and :class:`SequentialGateSession` concludes from what it decided — after Ctrl-C too,
writing what it reached (a decision, else "undecided" with its e-values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from .. import exitcodes
from ..evaluation import EvaluationSession
from ..outcome import SessionHooks
from .base import Started, indexed
from .evaluate import plan_gated

if TYPE_CHECKING:
    from ..._decide.verdict import Verdict
    from ..._project.spec import Spec
    from ..._store.evidence import ByTag
    from ..._store.rundir import RunDir
    from ..outcome import Outcome
    from ..planning import Planned
    from ..sequential_gate import SequentialGate


@dataclass(eq=False, kw_only=True)  # a plugin: identity, not value, equality
class SequentialGateSession(EvaluationSession):
    """Controller only: a gate session's conclusion, judged by the sequential gate."""

    sequential: SequentialGate

    def interrupted_verdicts(self, by_tag: ByTag) -> list[Verdict]:
        """Ctrl-C: the verdicts as they stand (none booked)."""
        nulls, judged = self._sequential_verdicts(by_tag, interrupted=True)
        self.sequential.finish()
        return nulls + judged

    def _judge(self, outcome: Outcome, by_tag: ByTag) -> list[Verdict]:
        """The e-processes' verdicts; what a decided tag skipped is not missing."""
        not_paid = self.sequential.not_paid()
        outcome.missing = [k for k in outcome.missing if k.tag not in not_paid]
        if not outcome.missing and not self.persistence.tally.dead_workers:
            outcome.exit_code = exitcodes.OK
        nulls, judged = self._sequential_verdicts(by_tag, interrupted=False)
        outcome.verdicts = nulls + judged
        outcome.closing += [(line, {}) for line in self.sequential.summary()]
        self.sequential.finish()
        return judged

    def _sequential_verdicts(
        self, by_tag: ByTag, *, interrupted: bool
    ) -> tuple[list[Verdict], list[Verdict]]:
        from ..._policy.verdicts import gate_config
        from ..gating import AlphaBudget

        config = gate_config(
            self.spec, veto_regressions=self.gate.veto_regressions, regression_rule=self.gate.regression_rule
        )
        nulls, judged = self.sequential.verdicts(
            by_tag, config, self.planned.null_tags, interrupted=interrupted
        )
        AlphaBudget.read(self.spec, self.rundir, len(judged)).record(
            self.rundir, nulls, judged, self.planned.null_tags, self.hooks
        )
        self.rundir.log.append_event(
            "sequential_gate", interrupted=interrupted, tags=self.sequential.to_event()
        )
        return nulls, judged


def sequential_role(config: pytest.Config, spec: Spec, rundir: RunDir, planned: Planned) -> SequentialGate:
    """The sequential gate's live role: every non-best tag gated against the best; the
    candidates share the round's α from the val-reuse budget equally (Bonferroni: each is
    decided on its own, as its e-process crosses), each null control gets what one candidate gets."""
    from ..gating import AlphaBudget
    from ..sequential_gate import SequentialGate

    plan = planned.plan
    gated = [c.tag for c in plan.candidates if c.tag != planned.best]
    siblings = [t for t in gated if t not in planned.null_tags]
    budget = AlphaBudget.read(spec, rundir, len(siblings))
    share = budget.round / max(len(siblings), 1)
    return SequentialGate(config, spec, rundir, plan, planned.best, gated, dict.fromkeys(gated, share))


class SequentialGateKind:
    """``--capevolve-sequential`` (with ``--capevolve-gate``, checked by the gate request)."""

    name = "sequential"

    def asked(self, config: pytest.Config, split: str) -> bool:
        return bool(config.option.capevolve_sequential)

    def start(self, config: pytest.Config, spec: Spec, pool_ids: list[str], split: str) -> Started:
        gate, planned, persistence, rundir, refusals = plan_gated(config, spec, pool_ids, split)
        sequential = sequential_role(config, spec, rundir, planned)
        role = SequentialGateSession(
            spec,
            rundir,
            planned,
            gate,
            refusals,
            persistence,
            explain=config.option.capevolve_explain,
            hooks=SessionHooks(config),
            sequential=sequential,
        )
        return Started(
            role,
            planned,
            persistence,
            rundir,
            indexed(rundir, planned),
            plugins=[("sequential", sequential)],
            interrupted_verdicts=role.interrupted_verdicts,
        )
