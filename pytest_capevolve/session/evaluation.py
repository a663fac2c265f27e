"""The evaluation session's conclusion: after the run loop, judge and choose the exit status.

Controller only. Registered beside :class:`.persistence.Persistence` (which saved every
rollout as it arrived) and the terminal reporter; this role reads back what is persisted,
judges when gating, writes the verdicts (screen refusals included) and sets the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..decide.evidence import index_records
from ..decide.gate import INDECISIVE, REJECT, Verdict
from ..decide.judging import verdict_file
from ..project.candidate import SEED_TAG
from ..project.spec import Spec
from ..store.rundir import RunDir
from . import exitcodes
from .judging import book_verdicts, judge
from .outcome import Outcome
from .persistence import Persistence, record_finish, summarize
from .planning import GateRequest, Planned


@dataclass(eq=False)  # a plugin: identity, not value, equality
class EvaluationSession:
    """Controller only: the conclusion of this session kind, run by :class:`.outcome.SessionEnd`."""

    spec: Spec
    rundir: RunDir
    planned: Planned
    gate: GateRequest
    refusals: list[Verdict]
    persistence: Persistence

    def conclude(self) -> Outcome:
        plan = self.planned.plan
        by_tag = index_records(self.rundir.indexed_rollouts(plan.split, plan.tags() | {SEED_TAG}))
        outcome = summarize(plan, by_tag, self.persistence.tally, against=self.planned.best)
        judged: list[Verdict] = []
        if self.gate.enabled:
            nulls, judged = judge(
                self.spec,
                self.rundir,
                plan,
                by_tag,
                best=self.planned.best,
                null_tags=self.planned.null_tags,
                gate=self.gate,
            )
            outcome.verdicts = nulls + judged
        for verdict in self.refusals:
            self.rundir.write_verdict(verdict_file(verdict, null_control=False))
        outcome.verdicts += self.refusals
        outcome.nulls = [v for v in outcome.verdicts if v.tag in self.planned.null_tags]
        if self.gate.enabled and self.gate.commit == "auto":
            booked = book_verdicts(self.spec, self.rundir, [*judged, *self.refusals])
            outcome.closing += [(line, {}) for line in booked]
        elif judged or self.refusals:
            outcome.closing.append(
                (
                    "--capevolve-commit none: verdicts written as evidence, no decision booked "
                    "(capevolve commit TAG --decision ...)",
                    {},
                )
            )
        decisions = {v.decision for v in [*judged, *self.refusals]}
        if outcome.exit_code == exitcodes.OK:
            if INDECISIVE in decisions:
                outcome.exit_code = exitcodes.INDECISIVE
            elif REJECT in decisions:
                outcome.exit_code = exitcodes.REJECTED
        record_finish(self.spec, self.rundir, plan, self.persistence.tally, outcome, by_tag)
        return outcome
