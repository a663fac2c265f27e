"""Judging and booking: a gate session's round of verdicts, and the decisions they become.

Controller only, after the run loop, from what is persisted: nulls first (their deltas set the floor), then
the candidates as a round; with ``--capevolve-commit auto`` each is booked as ``capevolve commit`` would."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._decide import alpha_budget
from .._decide.alpha_budget import as_fraction, counted_look_factor, shown_decision
from .._decide.basis import Basis
from .._decide.rounds import gate_round
from .._decide.verdict import ACCEPT, INDECISIVE, REJECT, GateConfig, Verdict
from .._policy.booking.adoption import adoption
from .._policy.booking.commit import INDECISIVE as BOOKED_INDECISIVE
from .._policy.booking.commit import CommitRefused
from .._policy.gate.regate import NULL_PASSES, Passing, counted_looks, first_evidence, passed
from .._policy.gate.verdicts import Evidence, as_null, gate_config, null_config, null_deltas, verdict_file
from .._policy.repeats.identity import REPEAT
from .._project.spec import Spec
from .._project.way_on import commit_command
from .._store.log.event_kinds import GATE_DECISION, NULL_GATED
from .._store.readers.evidence import ByTag
from .._store.rundir import RunDir
from .outcome import SessionHooks

if TYPE_CHECKING:
    from .evaluation import EvaluationSession


def judge(
    session: EvaluationSession, by_tag: ByTag, warnings: list[str]
) -> tuple[list[Verdict], list[Verdict], dict[str, dict[str, Any]]]:
    """(nulls' verdicts, candidates' verdicts in order, tags another session decided meanwhile → that
    verdict), written to ``verdicts/``; ``warnings`` are said in every verdict."""
    from .._policy.repeats.identity import standing_verdict

    spec, rundir, planned = session.spec, session.rundir, session.planned
    plan, best = planned.plan, planned.best
    # a tag already decided is re-derived by the session, never judged again
    # (:mod:`.._policy.repeats.identity`)
    siblings = [
        c.tag
        for c in plan.candidates
        if c.tag != best and c.tag not in planned.null_tags and c.tag not in planned.decided
    ]
    # a redraw of a rollout the log already holds is not new evidence (:mod:`.._store.readers.evidence`)
    evidence, repaid = first_evidence(spec, rundir, by_tag, plan.task_ids, plan.num_trials, session.prefer)
    # The α budget is read, the round judged at it and its decisions logged under the run's
    # lock, in one hold: a second gate session on the run judging at the same moment waits here,
    # then reads this one's decisions and takes the next, smaller level — two decisions never
    # take one level (issue 25). The evidence is read above, unlocked; the user's hooks are
    # called after the hold (a hook may run a command that takes the lock).
    with rundir.lock():
        # two sessions gating the same tag at once: the first to judge decides it, the second
        # finds its verdict here and shows it (the first decision stands, :mod:`.._policy.repeats.identity`)
        late = {tag: found for tag in siblings if (found := standing_verdict(rundir, tag)) is not None}
        undecided = [tag for tag in siblings if tag not in late]
        nulls, verdicts, files = _judged_round(session, evidence, repaid, undecided, warnings)
    session.hooks.verdicts_written(files)
    return nulls, verdicts, late


def _judged_round(
    session: EvaluationSession, evidence: Evidence, repaid: Any, siblings: list[str], warnings: list[str]
) -> tuple[list[Verdict], list[Verdict], list[tuple[dict[str, Any], Path]]]:
    """Under the run's lock: the budget as the log has it now, the nulls and the round judged at it,
    verdicts written and decisions logged; (nulls, verdicts, the files to announce)."""
    spec, rundir, planned, gate = session.spec, session.rundir, session.planned, session.gate
    best, null_tags = planned.best, planned.null_tags
    budget = AlphaBudget.read(spec, rundir, siblings, against=best)
    config = gate_config(
        spec,
        veto_regressions=gate.veto_regressions,
        regression_rule=gate.regression_rule,
        alpha=None if budget.schedule == "constant" else budget.round,  # None: the spec's α as it is
    )
    nulls = [as_null(evidence.judge(tag, best, null_config(config))) for tag in null_tags]
    floor = null_deltas(nulls)
    looked = counted_looks(rundir, siblings, best)

    def judged(tag: str, against: str, level: GateConfig) -> Verdict:
        if tag in looked:  # its first look decided nothing but showed the data: this is look 2
            level = replace(level, alpha=as_fraction(level.alpha) * counted_look_factor(spec.grow_max_looks))
        return evidence.judge(tag, against, level, floor)

    passing = Passing(
        spec, repaid, looked, planned.labels, gate.overridden, gate.schedule_why, gate.veto_regressions
    )
    verdicts = [
        passed(passing, v) for v in gate_round(judged, siblings, best, config, gate.multiple).verdicts
    ]
    nulls = [passed(replace(passing, schedule_why=None), v, NULL_PASSES) for v in nulls]
    now_best = rundir.state.best()
    if now_best != best:  # another session accepted while this one paid: said, and commit refuses an accept
        warnings = [
            *warnings,
            f"the best moved to {now_best!r} while this session ran (another session booked it): this "
            f"verdict is against {best!r}; gate again against {now_best!r}",
        ]
    if warnings:
        verdicts = [replace(v, warnings=[*v.warnings, *warnings]) for v in verdicts]
        nulls = [replace(v, warnings=[*v.warnings, *warnings]) for v in nulls]
    return nulls, verdicts, budget.record(rundir, nulls, verdicts, null_tags)


class AlphaBudget:
    """One round's share of the run's α budget, as the log has it, read and spent under the run's lock. A
    round re-run on the same rollouts keeps its slots: the same evidence judged twice is one decision at
    one level."""

    def __init__(
        self, spec: Spec, events: list[dict[str, Any]], siblings: int | list[str], against: str | None = None
    ) -> None:
        self.schedule = spec.gate_alpha_schedule
        self.alpha = spec.gate_alpha
        self.decided = alpha_budget.decisions_so_far(events)
        self.accepts = alpha_budget.accepted_decisions(events)
        self.discarded = alpha_budget.discarded_decisions(events)
        self._taken = 0
        self._earlier = {
            (e.get("kind"), e.get("tag"), e.get("against")): e
            for e in events
            if e.get("kind") in (GATE_DECISION, NULL_GATED)
        }
        count = siblings if isinstance(siblings, int) else len(siblings)
        again = self._slots_taken(siblings, against)
        if again is None:
            self.round = alpha_budget.round_alpha(
                self.schedule, spec.gate_alpha, self.decided, count, self.accepts, self.discarded
            )
        else:  # the round's slots, as they were taken: the accepts before the round earned them
            before = [a for a in self.accepts if a < min(again)]
            dropped = [d for d in self.discarded if d < min(again)]
            self.round = sum(
                (alpha_budget.alpha_for(self.schedule, spec.gate_alpha, j, before, dropped) for j in again),
                Fraction(0),
            )

    def _slots_taken(self, siblings: int | list[str], against: str | None) -> list[int] | None:
        """The slots every sibling already took against ``against`` (a re-run), else None."""
        if isinstance(siblings, int) or not siblings or against is None:
            return None
        slots = []
        for tag in siblings:
            earlier = self._earlier.get((GATE_DECISION, tag, against))
            if (
                earlier is None
                or earlier.get("schedule") != self.schedule
                or not isinstance(earlier.get("j"), int)
            ):
                return None
            slots.append(int(earlier["j"]))
        return slots

    @classmethod
    def read(
        cls, spec: Spec, rundir: RunDir, siblings: int | list[str], against: str | None = None
    ) -> AlphaBudget:
        return cls(spec, rundir.log.events(), siblings, against)

    def slot(self, verdict: Verdict) -> tuple[dict[str, object], bool]:
        earlier = self._earlier.get((GATE_DECISION, verdict.tag, verdict.against))
        if earlier is not None:
            keys = ("schedule", "j", "alpha_j", "alpha_round", "discarded")
            return {k: earlier.get(k) for k in keys if k in earlier or k != "discarded"}, False
        self._taken += 1
        j = self.decided + self._taken
        level = alpha_budget.alpha_for(self.schedule, self.alpha, j, self.accepts, self.discarded)
        slot: dict[str, object] = {
            "schedule": self.schedule,
            "j": j,
            "alpha_j": float(level),
            "alpha_round": float(self.round),
        }
        if self.schedule in alpha_budget.DISCARDING:  # Δ̄ < 0: spends nothing (addis)
            slot["discarded"] = alpha_budget.is_discarded(
                self.schedule, verdict.delta_exact, verdict.decision
            )
        return slot, True

    def record(
        self, rundir: RunDir, nulls: list[Verdict], verdicts: list[Verdict], null_tags: list[str]
    ) -> list[tuple[dict[str, Any], Path]]:
        """Log one ``gate_decision`` per candidate decided and one ``null_gated`` per null, then write the
        verdicts; returns the files to announce once the lock is let go. Undecided spends nothing. Each
        decision is logged before its file, so a kill between leaves a spent level and no verdict, never a
        level taken twice."""
        files: list[tuple[dict[str, Any], Path]] = []
        for verdict in nulls:
            fresh = (NULL_GATED, verdict.tag, verdict.against) not in self._earlier
            if fresh and verdict.decision in (ACCEPT, REJECT):
                rundir.log.append_event(
                    NULL_GATED,
                    tag=verdict.tag,
                    against=verdict.against,
                    decision=verdict.decision,
                    alpha=verdict.alpha,
                )
            written = verdict_file(verdict, null_control=True)
            files.append((written, rundir.verdicts.write_verdict(written)))
        for verdict in verdicts:
            if verdict.decision in (ACCEPT, REJECT):
                slot, fresh = self.slot(verdict)
            else:  # indecisive or undecided: no decision, no α spent
                slot, fresh = {"schedule": self.schedule, "j": None, "alpha_j": None}, False
            if fresh:
                rundir.log.append_event(
                    GATE_DECISION, tag=verdict.tag, against=verdict.against, decision=verdict.decision, **slot
                )
            written = verdict_file(verdict, null_control=False, nulls=null_tags, alpha_budget=slot)
            files.append((written, rundir.verdicts.write_verdict(written)))
        return files


def booked_as(verdict: Verdict) -> tuple[str, str | None]:
    """The decision (and basis) ``--capevolve-commit auto`` books for a verdict (:func:`shown_decision`)."""
    if verdict.decision == ACCEPT:
        return "accept", None
    if verdict.decision == INDECISIVE:
        return BOOKED_INDECISIVE, verdict.basis
    if verdict.basis in (Basis.MICRO_TEST_FAIL, Basis.REPEAT):
        return "reject", verdict.basis
    shown = shown_decision(verdict.decision, verdict.basis, verdict.delta_mean, verdict.details.get("looks"))
    if shown in ("provisional", "inconclusive"):
        return shown, None
    return "reject", "gate"


def repeat_line(spec: Spec, rundir: RunDir, verdict: Verdict) -> str:
    """A REPEAT of accepted bytes: nothing booked, and the command adopting an earlier accept if it can."""
    details, best = verdict.details or {}, rundir.state.best()
    level = details.get("earlier_level")
    try:
        adopt = adoption(rundir, rundir.verdicts.verdict(verdict.tag), best, spec) and (
            f"; `{commit_command(verdict.tag, 'accept', spec.project_dir, rundir.run_id)}` adopts that "
            "accept as this run's best (labelled, nothing paid; the next session pays its val rollouts once)"
        )
    except CommitRefused as exc:
        adopt = f"; {exc}"
    at = f" at {level})" if level else ")"
    return f"{verdict.tag}: nothing booked — repeat of {details.get('repeats')!r} (accepted{at}{adopt or ''}"


def book_verdicts(spec: Spec, rundir: RunDir, verdicts: list[Verdict], hooks: SessionHooks) -> list[str]:
    """Book each verdict in order; a line each saying what was booked, or why not."""
    lines = []
    for verdict in verdicts:
        if verdict.decision == REPEAT:  # bytes already accepted: that decision stands, none is new
            lines.append(repeat_line(spec, rundir, verdict))
            continue
        decision, basis = booked_as(verdict)
        note = f"gate session: {verdict.reason}"
        lines.append(hooks.booked_line(spec, rundir, verdict.tag, decision, basis, note, "verdict"))
    return lines
