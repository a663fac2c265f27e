"""The sequential-gate kind (``--capevolve-gate --capevolve-sequential``): a gate that stops paying for a
tag once its e-process decides it (controller only)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pytest

from ... import exitcodes
from ..._decide.basis import Basis
from ..._store.log.event_kinds import SEQUENTIAL_GATE
from ..evaluation import EvaluationSession
from .base import Started, indexed
from .evaluate import start_gated
from .options import refuse_pairwise

if TYPE_CHECKING:
    from ..._decide.verdict import Verdict
    from ..._project.spec import Spec
    from ..._store.readers.evidence import ByTag
    from ..._store.rundir import RunDir
    from ..gating import AlphaBudget
    from ..outcome import Outcome
    from ..planning import Planned
    from ..sequential_gate import SequentialGate


@dataclass(eq=False, kw_only=True)  # a plugin: identity, not value, equality
class SequentialGateSession(EvaluationSession):
    sequential: SequentialGate = field(init=False)

    def __post_init__(self) -> None:
        self.sequential = sequential_role(self.persistence.config, self.spec, self.rundir, self.planned)

    def interrupted_verdicts(self, by_tag: ByTag) -> list[Verdict]:
        nulls, judged = self._sequential_verdicts(by_tag, interrupted=True)
        self.sequential.finish()
        return nulls + judged

    def _judge(self, outcome: Outcome, by_tag: ByTag) -> list[Verdict]:
        # a decided tag's missing rollouts are missing on purpose, not an infra failure
        outcome.missing = [k for k in outcome.missing if k.tag not in self.sequential.stopped]
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
        from ..._policy.gate.verdicts import gate_config
        from ..gating import AlphaBudget

        config = gate_config(
            self.spec, veto_regressions=self.gate.veto_regressions, regression_rule=self.gate.regression_rule
        )
        nulls, judged = self.sequential.verdicts(
            by_tag, config, self.planned.null_tags, interrupted=interrupted
        )
        with self.rundir.lock():  # read and spent in one hold, as a gate session's (issue 25)
            budget = AlphaBudget.read(self.spec, self.rundir, len(judged))
            judged = [self._still_its_level(v, budget) for v in judged]
            files = budget.record(self.rundir, nulls, judged, self.planned.null_tags)
            tags = {t: d.numbers() for t, d in self.sequential.decisions.items()}
            self.rundir.log.append_event(SEQUENTIAL_GATE, interrupted=interrupted, tags=tags)
        self.hooks.verdicts_written(files)
        return nulls, judged

    def _still_its_level(self, verdict: Verdict, budget: AlphaBudget) -> Verdict:
        """An accept whose e-process crossed at a share of the budget another session has since taken is
        undecided (spending nothing); a reject stands."""
        from ..._decide.stopping import UNDECIDED
        from ..._decide.verdict import ACCEPT

        seen = self.sequential.budget_at_start
        now = (budget.decided, tuple(budget.accepts))
        if verdict.decision != ACCEPT or seen is None or seen == now or budget.schedule == "constant":
            return verdict
        line = (
            f"undecided: another gate session on this run booked {now[0] - seen[0]} decision(s) while this "
            f"sequential gate ran, so the α share it crossed at (the budget after {seen[0]} decisions) "
            "is no longer this decision's to spend; gate it again (the level is read when it decides)"
        )
        details = {
            **verdict.details,
            "sequential": {**verdict.details.get("sequential", {}), "outcome": UNDECIDED},
        }
        return replace(verdict, decision=UNDECIDED, basis=Basis.LEVEL_TAKEN, reason=line, details=details)


def sequential_role(config: pytest.Config, spec: Spec, rundir: RunDir, planned: Planned) -> SequentialGate:
    """The live role: every non-best tag against the best; the candidates share the round's α equally
    (Bonferroni), each null gets one candidate's share and follows the candidates' stop."""
    from ..gating import AlphaBudget
    from ..sequential_gate import SequentialGate

    plan = planned.plan
    gated = [c.tag for c in plan.candidates if c.tag != planned.best]
    siblings = [t for t in gated if t not in planned.null_tags]
    budget = AlphaBudget.read(spec, rundir, len(siblings))
    share = budget.round / max(len(siblings), 1)
    nulls = [t for t in gated if t in planned.null_tags]
    role = SequentialGate(config, spec, rundir, plan, planned.best, gated, dict.fromkeys(gated, share), nulls)
    role.budget_at_start = (budget.decided, tuple(budget.accepts))
    return role


class SequentialGateKind:
    name = "sequential"

    def asked(self, config: pytest.Config, split: str) -> bool:
        return bool(config.option.capevolve_sequential)

    def start(self, config: pytest.Config, spec: Spec, pool_ids: list[str], split: str) -> Started:
        refuse_pairwise(spec, "--capevolve-sequential")
        role, planned, persistence, rundir = start_gated(config, spec, pool_ids, split, SequentialGateSession)
        plugins: list[tuple[str, object]] = [("sequential", role.sequential)]
        persisted = indexed(rundir, planned)
        return Started(role, planned, persistence, rundir, persisted, plugins, role.interrupted_verdicts)
