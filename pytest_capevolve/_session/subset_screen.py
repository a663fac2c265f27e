"""A subset-screen session: ``--capevolve-screen TIER``.

Controller only. Owes only the candidate's rollouts on a subset of val (:mod:`.._decide.screen`); the best's
side is read from its persisted rollouts. The screen kills or promotes, never accepts, and writes
``screens/<tag>__tier<N>.json``, no verdict (the gate reads full val only)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import exitcodes
from .._decide import screen as ladder
from .._decide.verdict import Verdict
from .._policy import guards
from .._policy.gate.verdicts import gate_config
from .._project.candidate import SEED_TAG, CandidateError, check_tag
from .._project.spec import Spec, splits_for
from .._project.splits import TEST_SPLIT
from .._project.way_on import pasteable
from .._show.report import summarize_arm
from .._store.files import atomic_write_json
from .._store.log.event_kinds import SCREEN, SCREEN_STARTED
from .._store.readers.evidence import ByTag, first_outcomes, index_records, reward_matrix, val_paid_by_tag
from .._store.rundir import RunDir, RunDirError
from .gating import AlphaBudget
from .outcome import Outcome, SessionHooks
from .persistence import Persistence, record_finish, summarize
from .plan_build import build_plan, valid_column_keys
from .planning import CandidateRequest, Planned, frozen_ids, planned_at
from .refusals import Screens


@dataclass(frozen=True)
class ScreenRequest:
    tier: int = 1

    @property
    def label(self) -> str:
        return f"tier{self.tier}"


@dataclass
class ScreenPlanned(Planned):
    tag: str = ""
    request: ScreenRequest = field(default_factory=ScreenRequest)
    subset: list[str] = field(default_factory=list)
    val_ids: list[str] = field(default_factory=list)


def plan_screen(
    spec: Spec,
    rundir: RunDir,
    pool_ids: list[str],
    candidate: CandidateRequest,
    request: ScreenRequest,
    screens: Screens,
) -> ScreenPlanned:
    rundir.ensure_spec_lock(spec)
    guards.refuse_finalized(rundir, guards.Checkpoint.SESSION)
    splits = rundir.ensure_splits(lambda: splits_for(spec, pool_ids))
    val_ids = frozen_ids(rundir, splits, "val", pool_ids)
    best = rundir.state.best()
    tag = check_tag(candidate.tag)
    if tag in (best, SEED_TAG):
        raise CandidateError(f"--capevolve-screen: {tag!r} is the best (or the seed); screen a candidate")
    records = index_records(rundir.rollouts.indexed_rollouts("val", [best]))
    best_matrix = reward_matrix(records.get(best, {}), val_ids, spec.num_trials)
    # the tasks are chosen on the best's selection trials; the harm test reads the others
    means = ladder.selection_means(best_matrix, val_ids, spec.num_trials)
    if not means:
        evaluate = pasteable("pytest --capevolve-run PROJECT", rundir.project_dir)
        raise RunDirError(
            f"run {rundir.run_id}: the best {best!r} has no val rollouts to screen against; evaluate it "
            f"first (capevolve baseline, or {evaluate})"
        )
    subset = ladder.select(means, rundir.run_id, tag, request.tier)
    screens.prepare(splits[TEST_SPLIT], splits["val"])
    planned_candidates = []
    if not screens.refused(tag, candidate.path, best):
        digest = rundir.snapshots.register_candidate(tag, candidate.path, screens.screened.get(tag))
        planned_candidates.append(planned_at(spec, rundir, tag, candidate.path, digest))
    claimed = rundir.claims.others()
    plan = build_plan(
        spec,
        rundir,
        "val",
        subset,
        planned_candidates,
        valid_column_keys(rundir.rollouts.indexed_columns("val", [c.tag for c in planned_candidates])),
        SCREEN_STARTED,
        claimed=claimed,
        screen=request.label,
    )
    waiting_on = sorted({claimed[k] for k in plan.awaited})
    return ScreenPlanned(
        plan, best, waiting_on=waiting_on, tag=tag, request=request, subset=subset, val_ids=val_ids
    )


@dataclass(eq=False)  # a plugin: identity, not value, equality
class ScreenSession:
    spec: Spec
    rundir: RunDir
    planned: ScreenPlanned
    refusals: list[Verdict]
    persistence: Persistence
    commit: str
    hooks: SessionHooks

    def conclude(self) -> Outcome:
        plan, planned = self.planned.plan, self.planned
        by_tag = index_records(self.rundir.rollouts.indexed_rollouts("val"))
        outcome = summarize(plan, by_tag, self.persistence.tally, against=planned.best)
        # the best's side on the subset, read from its persisted rollouts (never paid here)
        best_row = summarize_arm(
            by_tag.get(planned.best, {}),
            tag=planned.best,
            split="val",
            task_ids=planned.subset,
            num_trials=plan.num_trials,
            paid=0,
            reused=len(planned.subset) * plan.num_trials,
        )
        outcome.rows.insert(0, best_row)
        # the tamper guard or a microcase refused it: nothing screened, and (like every screen)
        # no verdict file — the refusal is shown and logged; a gate session books it
        outcome.verdicts += self.refusals
        if self.refusals:
            outcome.exit_code = exitcodes.for_decisions([self.refusals[0].decision])
            outcome.say(
                f"{planned.tag}: refused before any rollout, so not screened (a screen writes no verdict and "
                "books nothing); fix it, or gate it (--capevolve-gate) to book the refusal",
                yellow=True,
            )
        elif outcome.missing:
            outcome.say(
                f"screen incomplete: {len(outcome.missing)} of the candidate's subset rollouts are missing, "
                "so no kill or promote; the command above completes them",
                yellow=True,
            )
        else:
            self._decide(by_tag, outcome)
        record_finish(self.spec, self.rundir, plan, self.persistence.tally, outcome, by_tag)
        return outcome

    def _decide(self, by_tag: ByTag, outcome: Outcome) -> None:
        spec, rundir, planned = self.spec, self.rundir, self.planned
        tag, best, subset, val_ids = planned.tag, planned.best, planned.subset, planned.val_ids
        trials = spec.num_trials
        # a kill books a reject: each row at the first valid outcome the log holds, a row no rollout
        # event logged refused (exit 11), as a gate reads them (:mod:`.._store.readers.evidence`)
        by_tag, _ = first_outcomes(
            rundir, {t: by_tag.get(t, {}) for t in (tag, best)}, spec.success_threshold
        )
        candidate = reward_matrix(by_tag.get(tag, {}), subset, trials)
        best_side = reward_matrix(by_tag.get(best, {}), subset, trials)
        best_full = reward_matrix(by_tag.get(best, {}), val_ids, trials)
        rows = [val_ids.index(t) for t in subset]
        # the level the candidate's gate would decide at next under the run's schedule (quoted by a
        # ceiling kill; the ceiling itself is tested at the spec's α, which no decision exceeds)
        budget = AlphaBudget.read(spec, rundir, [tag], against=best)
        level = gate_config(spec, alpha=None if budget.schedule == "constant" else budget.round).alpha
        result = ladder.decide_screen(
            candidate,
            best_side,
            alpha=ladder.tier_alpha(spec.screen_alpha, planned.request.tier),  # the climb's share
            best_full=best_full,
            subset_rows=rows,
            gate=gate_config(spec),
            seed=spec.base_seed,
            num_trials=trials,
            gate_level=level,
        )
        # counted from the files, not this session's tally: rollouts paid by an interrupted
        # screen of the same candidate are fired too (earlier screens' share is not counted twice)
        on_subset = sum(1 for (task, k) in by_tag.get(tag, {}) if task in set(subset) and k < trials)
        counted = sum(int(e.get("fired", 0)) for e in rundir.log.of_kinds(SCREEN) if e.get("tag") == tag)
        fired = max(0, on_subset - counted)
        full_cost = len(val_ids) * trials
        rundir.log.append_event(
            SCREEN,
            tag=tag,
            against=best,
            screen=planned.request.label,
            tasks=len(subset),
            decision=result.decision,
            basis=result.basis,
            delta_mean=result.delta_mean,
            p_harm=result.p_harm,
            fired=fired,
            full_val_rollouts=full_cost,
        )
        events = rundir.log.of_kinds(SCREEN)
        ledger = ladder.ledger(events, val_paid_by_tag(rundir, events))
        record = {
            "tag": tag,
            "against": best,
            "tier": planned.request.tier,
            "ids": subset,
            "n_tasks": result.n_tasks,
            "trials": trials,
            "delta_mean": result.delta_mean,
            "p_value": result.p_harm,
            "p_exact": result.p_harm_exact,
            "p_meaning": "one-sided exact sign-flip test that the candidate is worse on the subset",
            "alpha": result.alpha,
            "ceiling_p": result.ceiling_p,
            "decision": result.decision,
            "basis": result.basis,
            "reason": result.reason,
            "rollouts_fired": fired,
            "rollouts_reused": len(subset) * trials - fired,
            "full_val_rollouts": full_cost,
            "breakeven_kill_rate": ladder.breakeven_kill_rate(fired, full_cost),
            "ledger": ledger,
            "note": "a screen never accepts; its numbers never reach the gate, which reads full val only",
        }
        atomic_write_json(rundir.root / "screens" / f"{tag}__{planned.request.label}.json", record)
        word = "KILL" if result.decision == ladder.KILL else "PROMOTE"
        outcome.say(f"screen {tag} ({planned.request.label}, {len(subset)} tasks): {word} — {result.reason}")
        outcome.say(ladder.ledger_line(ledger, "screen ledger"), yellow=ledger["net_rollouts"] < 0)
        if result.decision == ladder.KILL:
            outcome.exit_code = exitcodes.REJECTED
            if self.commit == "auto":
                basis, note = ladder.COMMIT_BASIS[result.basis], f"screen: {result.reason}"
                outcome.say(self.hooks.booked_line(spec, rundir, tag, "reject", basis, note, "screen"))
        else:
            outcome.say(
                "promoted, not accepted: gate it on full val (--capevolve-gate) or climb the ladder "
                f"(--capevolve-screen {min((planned.request.tier or 0) + 1, 3)})"
            )
