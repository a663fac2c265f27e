"""The evaluation session's conclusion: after the run loop, judge and choose the exit status.

Controller only: reads back what :class:`.persistence.Persistence` saved, judges when gating, writes the
verdicts (screen refusals included) and sets the outcome."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .. import exitcodes
from .._decide.alpha_budget import shown_decision
from .._decide.basis import UNRESOLVED
from .._decide.verdict import INDECISIVE, Verdict
from .._project.candidate import SEED_TAG
from .._project.spec import Spec
from .._project.way_on import commit_command
from .._store.readers.evidence import Arm, ByTag, index_records
from .._store.rundir import RunDir
from .outcome import Outcome, SessionHooks
from .persistence import Persistence, outcomes_of_columns, record_finish, summarize
from .planning import GateRequest, Planned

if TYPE_CHECKING:
    import pytest

    from .._policy.gate.judge import Prefer


class LazyArms(Mapping[str, Arm]):
    def __init__(self, read: Callable[[], ByTag]) -> None:
        self._read = read

    @functools.cached_property
    def _arms(self) -> ByTag:
        return self._read()

    def __getitem__(self, tag: str) -> Arm:
        return self._arms[tag]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arms)

    def __len__(self) -> int:
        return len(self._arms)


@dataclass(eq=False)  # a plugin: identity, not value, equality
class EvaluationSession:
    spec: Spec
    rundir: RunDir
    planned: Planned
    gate: GateRequest
    refusals: list[Verdict]
    persistence: Persistence
    hooks: SessionHooks  # the user's verdict_written and decision_booked hooks
    explain: bool = False  # --capevolve-explain: each verdict in plain words
    # tags another session decided while this one paid (found when judging): shown as decided
    late: dict[str, dict[str, Any]] = field(default_factory=dict)
    # judges the stored outputs a ``pairwise`` verdict reads (:func:`preferences_judge`)
    prefer: Prefer | None = None

    def _say_val_budget(self, outcome: Outcome) -> None:
        from .._policy.budget import val_budget  # scipy: imported only by a session that gated

        events = self.rundir.log.events()
        n_val = len(self.planned.plan.task_ids)
        # under commit auto this session's decisions are booked right after this line; earlier ones may wait
        booking = self.planned.plan.tags() if self.gate.commit == "auto" else ()
        verdicts = self.rundir.verdicts.verdicts()
        reuse = val_budget.val_reuse(self.spec, events, verdicts, n_val, booking, self.rundir.run_id)
        alarm = val_budget.run_calibration(self.spec, events)
        outcome.say(
            f"{val_budget.decisions_said(reuse)}; {reuse['advice']}", yellow=bool(reuse["refresh_val"])
        )
        outcome.say(alarm["text"], red=bool(alarm["alarm"]))

    def conclude(self) -> Outcome:
        """After the run loop: the table, verdicts, refusals' verdict files, decisions booked, exit status."""
        plan = self.planned.plan
        tags = plan.tags() | {SEED_TAG}
        # the table from the index's columns, as planning read them (kept with their check)
        columns = self.rundir.rollouts.indexed_columns(plan.split, tags, plan.block)
        outcome = summarize(
            plan, outcomes_of_columns(columns, plan.block), self.persistence.tally, against=self.planned.best
        )
        # the records as arms only for what reads them (a gate, the pages when they are drawn
        # again): a resume that decides nothing and changes no page makes none
        by_tag: ByTag = LazyArms(  # type: ignore[assignment]
            lambda: index_records(
                self.rundir.rollouts.indexed_rollouts(plan.split, tags, plan.block), plan.block
            )
        )
        if plan.block:
            outcome.say(
                f"replicate block {plan.block} (trial seeds base_seed + {plan.first_trial} + k): the gate and"
                f" report.md read block 0 only; compare the blocks with {self._multirep_command(plan.tags())}"
            )
        judged = self._judge(outcome, by_tag)
        if self.gate.enabled:
            self._say_val_budget(outcome)
        for verdict in self.refusals:
            from .._policy.gate.verdicts import verdict_file  # here: a resume loads no gate

            self.hooks.write_verdict(self.rundir, verdict_file(verdict, null_control=False))
        standing = self._standing()
        outcome.verdicts += self.refusals + standing
        outcome.nulls = [v for v in outcome.verdicts if v.tag in self.planned.null_tags]
        if self.explain and outcome.verdicts:
            outcome.explained = self._explained(by_tag, outcome.verdicts)
        self._book(outcome, [*judged, *self.refusals], tuple(standing))
        record_finish(self.spec, self.rundir, plan, self.persistence.tally, outcome, by_tag)
        return outcome

    def _standing(self) -> list[Verdict]:
        """The tags asked for that a verdict already decided, re-derived as ``capevolve gate`` does."""
        from .._policy.repeats.identity import already_decided_reason, recorded_verdict

        shown = []
        for tag, recorded in {**self.planned.decided, **self.late}.items():
            from .._policy.gate.regate import GateAsk, regate  # here: a resume loads no gate

            standing = recorded_verdict(recorded)
            if (recorded.get("details") or {}).get("sequential"):  # its own rule: shown as recorded
                shown.append(replace(standing, reason=already_decided_reason(recorded, standing.reason)))
                continue
            again = regate(self.spec, self.rundir, self.planned.plan.task_ids, GateAsk(tag))
            reason = again.reason
            if again.decision != standing.decision:
                # rollouts paid since (an infra error's, paid again) move the numbers: shown, but
                # the decision is the one taken, at its level — never the re-derived one
                reason = (
                    f"{standing.reason} (on the rollouts held now it would read {again.decision}: "
                    f"{again.reason} — evidence paid after the decision, not a decision)"
                )
                again = standing
            shown.append(replace(again, reason=already_decided_reason(recorded, reason)))
        return shown

    def _multirep_command(self, tags: set[str]) -> str:
        """``capevolve multirep`` of a tag this block evaluated against the best (its default), pasteable:
        ``TAG`` alone named the best too, which multirep refuses to compare with itself."""
        import shlex

        from .._project.candidate import null_control_of
        from .._project.way_on import pasteable

        best = self.planned.best
        others = sorted(t for t in tags if t not in (best, SEED_TAG) and null_control_of(t) is None)
        if others:  # a candidate against the best, multirep's default
            words = f"{shlex.quote(others[0])} PROJECT"
        elif SEED_TAG in tags and best != SEED_TAG:  # the best against the seed it was chosen over
            words = f"{shlex.quote(best)} PROJECT --against {SEED_TAG}"
        else:
            words = f"TAG PROJECT --against {shlex.quote(best)}"
        return pasteable(f"`capevolve multirep {words}`", self.spec.project_dir)

    def _judge(self, outcome: Outcome, by_tag: ByTag) -> list[Verdict]:
        """The gate's round (nulls first, into ``outcome.verdicts``); returns the candidates' verdicts."""
        if not self.gate.enabled:
            return []
        from .gating import judge

        load = self._load_lines()
        nulls, judged, late = judge(self, by_tag, load)
        self.late.update(late)
        outcome.verdicts = nulls + judged
        outcome.closing += [(line, {"yellow": True}) for line in load]
        outcome.closing += [(note, {}) for note in self.planned.notes]
        if not judged and not self.refusals and self.planned.best in self.planned.plan.tags():
            outcome.say(  # (a --capevolve-gate with no candidate named was told "the candidate asked for")
                f"nothing to gate: no candidate but the best ({self.planned.best}) is in this session (none "
                "was named, or the one named is the best already), so no null controls were paid; to gate a "
                "new version, name its folder with --capevolve-candidate FOLDER (its name is its tag)"
            )
        return judged

    def _load_lines(self) -> list[str]:
        """Whether another session paid beside this gate, and whether its nulls were paid at that load."""
        from .._policy.gate.verdicts import load_warnings, loads_by_tag
        from .._store.rundir import RUNS_DIR
        from .._store.sessions.claims import live_sessions

        persistence, plan = self.persistence, self.planned.plan
        now = live_sessions(self.spec.project_dir / RUNS_DIR, self.rundir.claims.path)
        others = {(o["run_id"], o["pid"], o["since"]): o for o in [*persistence.others_at_start, *now]}
        null_tags = self.planned.null_tags
        columns = self.rundir.rollouts.indexed_columns(plan.split, set(null_tags), plan.block)
        sums: dict[str, list[float]] = {}
        for tag, reward in zip(columns["tag"], columns["reward"], strict=True):
            if reward is not None:
                sums.setdefault(tag, []).append(float(reward))
        means = {tag: sum(r) / len(r) for tag, r in sums.items()}
        return load_warnings(
            in_flight=persistence.concurrency * persistence.workers,
            null_tags=null_tags,
            loads=loads_by_tag(self.rundir.log.events()),
            means=means,
            others=list(others.values()),
        )

    def _book(self, outcome: Outcome, decided: list[Verdict], standing: tuple[Verdict, ...] = ()) -> None:
        """Book the decisions (``--capevolve-commit auto``) or say why none was, and set the exit status
        (indecisive before rejected) when the run was clean. A standing verdict is booked only once."""
        if self.gate.enabled and self.gate.commit == "auto":
            from .._policy.gate.regate import booked_decision
            from .gating import book_verdicts

            unbooked = [v for v in standing if booked_decision(self.rundir, v.tag) is None]
            # an indecisive verdict the rollouts owed after infra errors could resolve: booking it would
            # decide the tag, and refuse the decision the session that completes them takes
            infra = outcome.exit_code == exitcodes.INFRA_FAILURE
            owed = [v for v in decided if infra and v.decision == INDECISIVE and v.basis in UNRESOLVED]
            booked = book_verdicts(
                self.spec, self.rundir, [v for v in [*decided, *unbooked] if v not in owed], self.hooks
            )
            outcome.closing += [(line, {}) for line in booked]
            outcome.closing += [
                (
                    f"{v.tag}: nothing booked — {v.basis}: the rollouts the infra errors left missing are "
                    "owed; complete them (the command above) and the gate decides on them",
                    {},
                )
                for v in owed
            ]
            outcome.closing += [
                (f"{v.tag}: nothing booked — already decided ({booked_decision(self.rundir, v.tag)})", {})
                for v in standing
                if v not in unbooked
            ]
        elif decided:
            from .._policy.repeats.identity import REPEAT
            from .gating import repeat_line

            tag = decided[0].tag if len(decided) == 1 else "TAG"
            book = commit_command(tag, "...", self.spec.project_dir, self.rundir.run_id)
            outcome.say(f"--capevolve-commit none: verdicts written as evidence, no decision booked ({book})")
            outcome.closing += [
                (repeat_line(self.spec, self.rundir, v), {}) for v in decided if v.decision == REPEAT
            ]
        if outcome.exit_code == exitcodes.OK:  # a provisional verdict exits as one, not as a reject
            outcome.exit_code = exitcodes.for_decisions(
                shown_decision(v.decision, v.basis, v.delta_mean, (v.details or {}).get("looks"))
                for v in [*decided, *standing]
            )

    def _explained(self, by_tag: ByTag, verdicts: list[Verdict]) -> list[str]:
        from .._policy.gate.verdicts import Evidence
        from .._show.explain import explain, plan_figures  # scipy: only when asked

        plan, best, nulls = self.planned.plan, self.planned.best, self.planned.null_tags
        evidence = Evidence.of_run(self.spec, self.rundir, by_tag, plan.task_ids, plan.num_trials)
        figures = plan_figures(
            evidence.matrix(best),
            [evidence.matrix(tag) for tag in nulls],
            num_trials=plan.num_trials,
            alpha=self.spec.gate_alpha,
        )
        lines = ["in plain words (--capevolve-explain):"]
        for verdict in verdicts:
            lines += explain(verdict, figures, null_control=verdict.tag in nulls)
        return lines


def preferences_judge(config: pytest.Config, rundir: RunDir) -> Prefer:
    """The adapter's ``prefer()`` judging what the log lacks; adapter and pool read only when asked."""

    def judge(tag: str, against: str, arms: tuple[Arm, Arm]) -> list[str]:
        from .._items.nodes import CONTEXT_KEY
        from .._policy.gate.judge import judge_missing

        context = config.stash[CONTEXT_KEY]
        return judge_missing(rundir, context.runner.adapter, context.pool, tag, against, arms)

    return judge
