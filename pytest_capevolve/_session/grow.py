"""A grow session: ``--capevolve-candidate TAG --capevolve-grow``.

Controller only. For a candidate whose last verdict against the best was provisional or unresolved: owes
``num_trials`` more trials per val task for it and the best (trial indices and seeds continue, so the pairing
holds), then gates again at the pooled n at this look's level; at most ``grow_max_looks − 1`` grows."""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from .. import exitcodes
from .._decide.alpha_budget import looks_record, shown_decision
from .._decide.basis import UNRESOLVED
from .._decide.verdict import ACCEPT, INDECISIVE, Verdict
from .._policy import guards
from .._policy.gate.regate import first_evidence
from .._policy.gate.verdicts import as_null, gate_config, null_config, null_deltas, verdict_file
from .._project.candidate import SEED_TAG, CandidateError, check_tag
from .._project.spec import Spec
from .._project.way_on import candidate_folder, commit_command, pasteable
from .._show.numbers import num
from .._store.log.event_kinds import GROW_STARTED, GROWN
from .._store.readers.evidence import index_records
from .._store.rundir import RunDir, RunDirError
from .gating import booked_as
from .outcome import Outcome, SessionHooks
from .persistence import Persistence, record_finish, summarize
from .plan_build import build_plan, valid_column_keys
from .planning import Planned, frozen_ids, planned_at, source_of


@dataclass
class GrowPlanned(Planned):
    tag: str = ""
    look: int = 2  # the look this grow's verdict is decided at
    decision_alpha: Fraction = Fraction(1, 20)


def grow_target(rundir: RunDir, value: str) -> tuple[str, Path]:
    """``--capevolve-candidate`` of a grow: a tag of the run, or the folder it was evaluated from."""
    path = Path(value)
    tag = path.name if path.is_dir() else value
    tag = check_tag(tag)
    if tag not in rundir.snapshots.known_tags():
        raise CandidateError(
            f"--capevolve-grow: {value!r} is not a candidate of run {rundir.run_id}; gate it first "
            "(--capevolve-gate), then grow it by its tag"
        )
    return tag, rundir.snapshots.snapshot_dir(tag)


def growable(spec: Spec, rundir: RunDir, tag: str, best: str) -> tuple[dict[str, Any], int]:
    if spec.grow_max_looks == 1:
        raise CandidateError(
            f"{spec.path}: growth is off (grow_max_looks: 1). Set grow_max_looks: 2 or 3 before a "
            "candidate's first gate — the first look then keeps part of α in reserve for the grows — "
            "and gate it again in a new run"
        )
    verdict = rundir.verdicts.verdict(tag)
    if verdict is None or not verdict.get("n_tasks"):
        raise CandidateError(f"{tag!r} has no full-val verdict to grow; gate it first (--capevolve-gate)")
    if verdict.get("against") != best:
        raise CandidateError(
            f"{tag!r} was gated against {verdict.get('against')!r}, but the best is now {best!r}: a grow "
            "adds trials to one comparison; gate it against the new best first"
        )
    looks = verdict.get("details", {}).get("looks") or {}
    if looks.get("max_looks") != spec.grow_max_looks:
        raise CandidateError(
            f"tag {tag!r}: its verdict was decided with {looks.get('max_looks', 1)} look(s) allowed, not "
            f"grow_max_looks {spec.grow_max_looks}: its first look spent its α without a reserve for "
            "growth, so another look would inflate false accepts; gate it again in a run that sets "
            "grow_max_looks from the start"
        )
    look = int(looks["look"])
    if look >= spec.grow_max_looks:
        raise CandidateError(
            f"{tag!r} has been grown {look - 1} time(s) ({look} looks of grow_max_looks "
            f"{spec.grow_max_looks}): no more grows. {_what_is_left(rundir, tag)}"
        )
    decision, basis = verdict.get("decision"), verdict.get("basis")
    provisional = decision != ACCEPT and decision != INDECISIVE and (verdict.get("delta_mean") or 0) > 0
    unresolved = decision == INDECISIVE and basis in UNRESOLVED
    if not (provisional or unresolved):
        delta = num(verdict.get("delta_mean"), "+.4f")
        raise CandidateError(
            f"tag {tag!r}: its verdict is {decision} ({basis}, Δ̄ = {delta}): only a provisional verdict "
            "(Δ̄ > 0 under the bar) or an unresolved one (coverage, error imbalance) is grown"
        )
    final = final_decision(rundir, tag)
    if final is not None:
        raise CandidateError(f"{tag!r} was already decided: {final['decision']}; a decided tag is not grown")
    return verdict, look


def final_decision(rundir: RunDir, tag: str) -> dict[str, Any] | None:
    """The tag's last booked decision that ends it (not provisional nor indecisive), if any."""
    open_ended = ("provisional", "indecisive")
    final = [e for e in rundir.decisions() if e["tag"] == tag and e["decision"] not in open_ended]
    return final[-1] if final else None


def _what_is_left(rundir: RunDir, tag: str) -> str:
    final = final_decision(rundir, tag)
    if final is not None:
        basis = f" ({final['basis']})" if final.get("basis") else ""
        return f"It is already booked: {final['decision']}{basis}; nothing is left to do for it"
    project, run_id = rundir.project_dir, rundir.run_id
    reject = commit_command(tag, "reject", project, run_id, "--reject-basis", "gate")
    return f"Book it: {commit_command(tag, 'inconclusive', project, run_id)} (or {reject})"


def refuse_regating_grown(spec: Spec, rundir: RunDir, tags: list[str]) -> None:
    """A gate session may not judge a grown candidate again against the same best (that would replace its
    pooled verdict with a first look). The refusal says what is left: another grow, booking it, or nothing."""
    best = rundir.state.best()
    grown = {e["tag"]: e for e in rundir.log.of_kinds(GROWN) if e["tag"] in tags and e.get("against") == best}
    for event in grown.values():  # the latest grow of each tag
        tag, look = event["tag"], int(event.get("look") or 0)
        if final_decision(rundir, tag) is not None:
            left = _what_is_left(rundir, tag)
        elif look >= spec.grow_max_looks:
            left = f"no grow is left (grow_max_looks {spec.grow_max_looks}). {_what_is_left(rundir, tag)}"
        else:
            book = commit_command(tag, "...", rundir.project_dir, rundir.run_id)
            left = f"grow it again (--capevolve-grow) or book it ({book})"
        raise CandidateError(
            f"{tag!r} was grown against {best!r} (look {look}): its verdict is at the pooled n; {left}"
        )


def plan_grow(spec: Spec, rundir: RunDir, pool_ids: list[str], value: str) -> GrowPlanned:
    """The plan of a grow session: candidate and best on val at the pooled trials, only the new ones owed."""
    rundir.ensure_spec_lock(spec)
    guards.refuse_finalized(rundir, guards.Checkpoint.SESSION)
    splits = rundir.splits()
    if splits is None:
        folder = candidate_folder(Path(value).name, rundir.project_dir, "CANDIDATE_FOLDER")
        gate = f"pytest --capevolve-run PROJECT --capevolve-candidate {folder} --capevolve-gate"
        raise RunDirError(
            f"run {rundir.run_id}: nothing was gated yet; gate the candidate first "
            f"(`{pasteable(gate, rundir.project_dir)}`), then grow it if its verdict is provisional"
        )
    val_ids = frozen_ids(rundir, splits, "val", pool_ids)
    best = rundir.state.best()
    tag, path = grow_target(rundir, value)
    if tag in (best, SEED_TAG):
        raise CandidateError(f"--capevolve-grow: {tag!r} is the best (or the seed); grow a candidate")
    verdict, look = growable(spec, rundir, tag, best)
    trials = spec.num_trials * (look + 1)
    planned = [
        planned_at(
            spec, rundir, best, source_of(spec, rundir, best), rundir.snapshots.candidate_hash(best) or ""
        ),
        planned_at(spec, rundir, tag, path, rundir.snapshots.candidate_hash(tag) or ""),
    ]
    claimed = rundir.claims.others()
    plan = build_plan(
        spec,
        rundir,
        "val",
        val_ids,
        planned,
        valid_column_keys(rundir.rollouts.indexed_columns("val", [c.tag for c in planned])),
        GROW_STARTED,
        decisions=1,
        claimed=claimed,
        num_trials=trials,
        grown=tag,
        look=look + 1,
    )
    nulls = [t for t in verdict.get("nulls", []) if rundir.snapshots.candidate_hash(t) is not None]
    return GrowPlanned(
        plan,
        best,
        null_tags=nulls,
        waiting_on=sorted({claimed[k] for k in plan.awaited}),
        tag=tag,
        look=look + 1,
        decision_alpha=_decision_alpha(verdict),
    )


def _decision_alpha(verdict: dict[str, Any]) -> Fraction:
    """The α of this decision's first look; a round's sibling grows at its Bonferroni share (conservative:
    Holm's first levels are at least that)."""
    alpha = Fraction(verdict["details"]["looks"]["decision_alpha"])
    family = verdict.get("details", {}).get("family") or {}
    if family.get("method") in ("holm", "bh") and int(family.get("siblings", 1)) > 1:
        alpha /= int(family["siblings"])
    return alpha


@dataclass(eq=False)  # a plugin: identity, not value, equality
class GrowSession:
    spec: Spec
    rundir: RunDir
    planned: GrowPlanned
    persistence: Persistence
    commit: str
    veto_regressions: bool
    hooks: SessionHooks

    def conclude(self) -> Outcome:
        spec, rundir, planned = self.spec, self.rundir, self.planned
        plan = planned.plan
        by_tag = index_records(rundir.rollouts.indexed_rollouts("val"))
        outcome = summarize(plan, by_tag, self.persistence.tally, against=planned.best)
        if outcome.missing:
            outcome.say(
                f"grow incomplete: {len(outcome.missing)} rollouts missing, so no verdict (the look is not "
                "spent); the command above completes them",
                yellow=True,
            )
        else:
            verdict = self._judge(by_tag)
            outcome.verdicts = [verdict]
            if self.commit == "auto":
                decision, basis = booked_as(verdict)
                note = f"grow: {verdict.reason}"
                outcome.say(
                    self.hooks.booked_line(spec, rundir, verdict.tag, decision, basis, note, "verdict")
                )
            looks = (verdict.details or {}).get("looks")
            shown = shown_decision(verdict.decision, verdict.basis, verdict.delta_mean, looks)
            if shown != ACCEPT:
                outcome.exit_code = exitcodes.for_decisions([shown])
        record_finish(spec, rundir, plan, self.persistence.tally, outcome, by_tag)
        return outcome

    def _judge(self, by_tag: Any) -> Verdict:
        spec, rundir, planned = self.spec, self.rundir, self.planned
        plan = planned.plan
        config = gate_config(
            spec, alpha=planned.decision_alpha, look=planned.look, veto_regressions=self.veto_regressions
        )
        # each rollout at its first logged outcome, as the gate session and `capevolve gate` read it
        evidence, _ = first_evidence(spec, rundir, by_tag, plan.task_ids, plan.num_trials)
        nulls = [as_null(evidence.judge(t, planned.best, null_config(config))) for t in planned.null_tags]
        verdict = evidence.judge(planned.tag, planned.best, config, null_deltas(nulls) or None)
        record = looks_record(planned.decision_alpha, planned.look, spec.grow_max_looks)
        verdict = replace(
            verdict,
            reason=f"{verdict.reason}; look {planned.look} of {spec.grow_max_looks} at the pooled "
            f"{plan.num_trials} trials per task",
            details={**verdict.details, "looks": record},
        )
        self.hooks.write_verdict(
            rundir, verdict_file(verdict, null_control=False, nulls=planned.null_tags), replacing=True
        )
        rundir.log.append_event(
            GROWN,
            tag=planned.tag,
            against=planned.best,
            look=planned.look,
            trials=plan.num_trials,
            level=record["level_exact"],
            decision=verdict.decision,
        )
        return verdict
