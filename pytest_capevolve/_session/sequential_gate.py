"""The sequential gate session role (``--capevolve-sequential``): stop paying once decided.

Controller only. Each candidate sees val in its own secret-derived order (:mod:`..decide.task_order`); the
null controls (copies of the best) take the session's order, the candidates' interleaved. A task complete on
both sides, with every task before it in that order, feeds its paired delta to the tag's e-processes; a
decided tag's remaining items skip (in-process via :attr:`..items.EvalContext.stopped`, on workers via the
stop marker). Once every candidate is decided, a null control that has not crossed follows them: it stops
when the session's order is complete for it up to the last task of their decided prefixes (its floor read
on those tasks), and the best with it. Feeding in the tag's order, never completion order, keeps the bets
predictable (speed could depend on the outcome)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from itertools import takewhile
from typing import Any

import numpy as np
import pytest

from .._decide import stopping as seqgate
from .._decide import task_order
from .._decide.basis import Basis
from .._decide.verdict import ACCEPT, INDECISIVE, GateConfig, Verdict
from .._items.nodes import CONTEXT_KEY, SEQUENTIAL_SKIP, item_name
from .._items.plan import EvalPlan
from .._policy.gate.verdicts import Evidence, as_null, null_deltas
from .._project.blocks import local_trial
from .._project.spec import Spec
from .._stats import sequential as seq
from .._store.log.event_kinds import ROLLOUT
from .._store.log.paid_by import UntrustedRecord
from .._store.readers.evidence import ByTag, first_outcomes, index_records
from .._store.rollouts.record import RolloutRecord
from .._store.rundir import RunDir
from .._store.sessions import markers
from .persistence import RECORDED


@dataclass(eq=False)  # a plugin: pluggy hashes it, so identity, not value, equality
class SequentialGate:
    config: pytest.Config
    spec: Spec
    rundir: RunDir
    plan: EvalPlan
    best: str
    gated: list[str]  # candidates and null controls, each gated against the best
    alphas: dict[str, Fraction]  # each gated tag's α (its share of the round's)
    nulls: list[str] = field(default_factory=list)  # the gated tags that are null controls
    trials: dict[tuple[str, str], dict[int, float | None]] = field(default_factory=dict)
    decisions: dict[str, seqgate.SequentialDecision] = field(default_factory=dict)
    stopped: set[str] = field(default_factory=set)
    # (tag, task, trial) whose first attempt was an infra error, paid again since or not: candidate code
    # can make a failing draw look like the API's error, so an efficacy crossing is held to the worst case
    errored: set[tuple[str, str, int]] = field(default_factory=set)
    # (tag, task, trial) → the first valid reward the log holds: a rollout paid again (its file vanished or
    # was quarantined) is no new evidence, as in a fixed gate (a redraw would be a re-roll)
    first_valid: dict[tuple[str, str, int], float] = field(default_factory=dict)
    saved: int = 0  # items skipped because their tag was decided: rollouts not paid
    # tags whose items were skipped as decided though this gate had not stopped them: the stop marker is a
    # file in the run dir, so whoever else writes it (unconfined code of the same user) or a worker that lies
    unasked: set[str] = field(default_factory=set)
    # (decisions, accepts) of the run's α budget when the shares in ``alphas`` were read
    budget_at_start: tuple[int, tuple[int, ...]] | None = None
    _tag_of: dict[str, str] = field(default_factory=dict, repr=False)  # item name → its tag (not_sent)

    def __post_init__(self) -> None:
        tags, task_ids = {self.best, *self.gated}, set(self.plan.task_ids)
        self.errored, self.first_valid = first_attempts(self.rundir, self.plan.split)
        indexed = self.rundir.rollouts.indexed_rollouts(self.plan.split, tags, self.plan.block)
        persisted = index_records(indexed, self.plan.block)
        try:  # resume: persisted counts, each key at the first valid outcome the log holds, as a gate reads
            held, _ = first_outcomes(self.rundir, persisted, self.spec.success_threshold)
        except UntrustedRecord:  # rollouts no session paid: nothing read, and the verdicts refuse (exit 11)
            held = {}
        for record in (r for arm in held.values() for r in arm.values()):
            if record.tag in tags and record.task_id in task_ids:
                self._add(record)
        self._update(self.gated)  # a tag decided by an earlier session is stopped before paying

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        session.config.stash[CONTEXT_KEY].stopped |= self.stopped

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # what the session recorded for this report (persistence.RECORDED), never what a worker says: a
        # record it did not owe (a trial the plan never asked, one reported twice) moves no e-process
        record = getattr(report, RECORDED, None)
        if record is not None:
            self._add(record)
            # only a task completed on both sides can move an e-process: the best's completes
            # it for every tag, a candidate's for itself
            if self._complete(record.tag, record.task_id):
                self._update(self.gated if record.tag == self.best else [record.tag])
        elif report.skipped and SEQUENTIAL_SKIP in (said := str(report.longrepr)):
            self.saved += 1
            tag = next((t for t in (self.best, *self.gated) if f"{t!r} is decided" in said), None)
            if tag is not None and tag not in self.stopped:
                self.unasked.add(tag)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Under ``--dist load``: one task's rollouts per worker at a time (few paid after a decision)."""
        if config.getvalue("dist") != "load":
            return None
        from .perf.window import window_scheduler

        window = max(2, self.plan.num_trials * len(self.plan.candidates))
        return window_scheduler(config, log, window, not_needed=self.not_sent, stops=self.stopped.__len__)

    def not_sent(self, nodeid: str) -> bool:
        """Controller, under xdist: is this item, not yet sent, of a decided tag? Then it is never sent
        (counted as saved), so a worker that cannot read the stop marker pays no more than its window."""
        if not self.stopped:
            return False
        if not self._tag_of:
            self._tag_of = {item_name(self.plan, key): key.tag for key in self.plan.owed_keys()}
        if self._tag_of.get(nodeid.rsplit("::", 1)[-1]) in self.stopped:
            self.saved += 1
            return True
        return False

    def _add(self, record: RolloutRecord) -> None:
        if local_trial(record.trial) >= self.plan.num_trials:
            return  # a trial a grow added: a fixed gate reads the first num_trials, and so does this one
        key = (record.tag, record.task_id, record.trial)
        reward: float | None = None
        if not (record.infra_error or record.reward is None):
            reward = self.first_valid.setdefault(key, float(record.reward))
        elif key in self.first_valid:  # a valid outcome stands
            reward = self.first_valid[key]
        else:
            self.errored.add(key)
        self.trials.setdefault((record.tag, record.task_id), {})[record.trial] = reward

    def _complete(self, tag: str, task_id: str) -> bool:
        return len(self.trials.get((tag, task_id), {})) >= self.plan.num_trials

    def _mean(self, tag: str, task_id: str) -> float | None:
        valid = [r for r in self.trials.get((tag, task_id), {}).values() if r is not None]
        return float(np.mean(valid)) if valid else None

    def order(self, tag: str) -> list[str]:
        if self.plan.orders and tag in self.plan.orders:
            return self.plan.orders[tag]
        return self.plan.order or self.plan.task_ids

    def seen(self, tag: str) -> list[str]:
        """The prefix of the tag's order with tasks complete on both sides (valid or not)."""
        both = takewhile(
            lambda task_id: self._complete(tag, task_id) and self._complete(self.best, task_id),
            self.order(tag),
        )
        return list(both)

    def decided_on(self, tag: str, decision: seqgate.SequentialDecision) -> list[str]:
        """The tasks ``decision`` read: every task seen fed it when its infra errors were imputed."""
        if decision.imputed:
            return self.seen(tag)[: decision.state.tasks]
        return self.prefix(tag, decision.state.tasks)

    def prefix(self, tag: str, n_deltas: int) -> list[str]:
        out, count = [], 0
        for task_id in self.seen(tag):
            if count >= n_deltas:
                break
            out.append(task_id)
            if self._mean(tag, task_id) is not None and self._mean(self.best, task_id) is not None:
                count += 1
        return out

    def deltas(self, tag: str, task_ids: list[str]) -> list[float]:
        means = [(self._mean(tag, task_id), self._mean(self.best, task_id)) for task_id in task_ids]
        return [cand - best for cand, best in means if cand is not None and best is not None]

    def worst_deltas(self, tag: str, task_ids: list[str]) -> list[float]:
        """Each task's delta with every trial whose first attempt was an infra error read as a failure of
        ``tag`` and a pass of the best: the worst case against an accept (the tasks are complete)."""

        def mean(side: str, task_id: str, fill: float) -> float:
            trials = self.trials.get((side, task_id), {}).items()
            errored = [r is None or (side, task_id, k) in self.errored for k, r in trials]
            return float(np.mean([fill if e else r for e, (_, r) in zip(errored, trials, strict=True)]))

        return [mean(tag, task_id, 0.0) - mean(self.best, task_id, 1.0) for task_id in task_ids]

    def horizon(self) -> list[str] | None:
        """Once every candidate is decided: the session's order up to the last task of their decided
        prefixes, what a null control completes before it follows them (None before)."""
        candidates = [t for t in self.gated if t not in self.nulls]
        if not candidates or not all(t in self.decisions and self.decisions[t].decided for t in candidates):
            return None
        needed = {t for c in candidates for t in self.decided_on(c, self.decisions[c])}
        order = self.order(self.best)
        return order[: max((i + 1 for i, t in enumerate(order) if t in needed), default=0)]

    def judged(self, tag: str) -> tuple[seqgate.SequentialDecision, list[str] | None]:
        """The tag's decision as its verdict reads it, and the horizon a null control followed the candidates
        to (None when it did not). A null that completed the horizon is read on it alone, a crossing there its
        own: what workers ran past it does not change its verdict."""
        horizon = self.horizon() if tag in self.nulls else None
        if horizon is None or len(self.seen(tag)) < len(horizon):
            return self.track(tag), None
        decision = self.track(tag, horizon)
        return decision, None if decision.decided else horizon

    def track(self, tag: str, seen: list[str] | None = None) -> seqgate.SequentialDecision:
        """The tag's e-processes on ``seen`` (its prefix). An efficacy crossing with an infra error among the
        tasks read stands only if the worst case crosses too (each error a failure of the tag, a pass of the
        best): the valid trials alone are those candidate code let through (it can make a failing draw look
        like the API's error), so it stays undecided until then, or until val is exhausted."""
        seen = self.seen(tag) if seen is None else seen

        def run(deltas: list[float]) -> seqgate.SequentialDecision:
            return seqgate.track(
                deltas,
                alpha=seqgate.split(self.alphas[tag]),
                min_effect=self.spec.gate_min_effect,
                total_tasks=len(self.plan.task_ids),
            )

        decision = run(self.deltas(tag, seen))
        read = set(seen)
        if decision.state.stopped != seq.EFFICACY or not any(
            t in (tag, self.best) and task_id in read for t, task_id, _ in self.errored
        ):
            return decision
        worst = replace(run(self.worst_deltas(tag, seen)), imputed=True)
        if worst.state.stopped == seq.EFFICACY:
            return worst
        return replace(worst, state=replace(worst.state, stopped=seq.UNDECIDED))

    def _update(self, tags: list[str]) -> None:
        changed = False
        for tag in tags:
            if tag in self.decisions and self.decisions[tag].decided:
                continue
            decision = self.track(tag)
            self.decisions[tag] = decision
            if decision.decided and tag not in self.stopped:
                self.stopped.add(tag)
                changed = True
        for tag in [t for t in self.nulls if t not in self.stopped]:
            if self.judged(tag)[1] is not None:  # the candidates are decided, its floor read on their tasks
                self.stopped.add(tag)
                changed = True
        if self.gated and all(t in self.stopped for t in self.gated) and self.best not in self.stopped:
            self.stopped.add(self.best)
            changed = True
        if changed:
            if CONTEXT_KEY in self.config.stash:  # not yet while the session is being planned
                self.config.stash[CONTEXT_KEY].stopped |= self.stopped
            if self.plan.sequential is not None:
                markers.write_stopped(self.rundir.root, self.plan.sequential, self.stopped)

    def verdicts(
        self, by_tag: ByTag, config: GateConfig, null_tags: list[str], *, interrupted: bool = False
    ) -> tuple[list[Verdict], list[Verdict]]:
        """(nulls' verdicts, candidates' verdicts). Crossed: the e-process's decision on the tasks seen;
        exhausted: the exact test at the α left; interrupted: "undecided" with the current e-values. Read from
        the rollouts sessions paid, each at its first valid outcome (UntrustedRecord otherwise), as a fixed
        gate's."""
        by_tag, _ = first_outcomes(self.rundir, by_tag, self.spec.success_threshold)

        def one(tag: str, floor: list[float | Fraction] | None) -> Verdict:
            decision, followed = self.judged(tag)
            level = replace(config, alpha=decision.alpha.alpha)
            early = decision.decided or interrupted
            seen = self.decided_on(tag, decision) if early else followed or self.plan.task_ids
            evidence = Evidence.of_run(self.spec, self.rundir, by_tag, seen, self.plan.num_trials)
            verdict = evidence.judge(tag, self.best, level, floor)
            if decision.decided:
                return seqgate.early_verdict(verdict, decision, veto_regressions=config.veto_regressions)
            if interrupted:
                return seqgate.undecided_verdict(verdict, decision)
            numerator, denominator = seq.exhaustion_p(
                np.asarray(self.deltas(tag, followed or self.order(tag))),
                alpha_efficacy=float(decision.alpha.efficacy),
                n_resamples=seqgate.EXHAUSTION_RESAMPLES,
                seed=config.seed,
            )
            verdict = seqgate.exhausted_verdict(verdict, decision, Fraction(numerator, denominator))
            return verdict if followed is None else seqgate.followed_verdict(verdict, len(followed))

        def order_from(tag: str) -> dict[str, Any]:
            if tag not in (self.plan.orders or {}):  # a null control: the session's order
                own = {c: order_from(c) for c in self.plan.orders or {}}
                return {"derivation": task_order.INTERLEAVED, "candidates": own}
            digest = self.plan.candidate(tag).content_hash
            return {
                "derivation": task_order.DERIVATION,
                "content_hash": digest,
                "secret_sha256": self.rundir.order_secret.recorded(),
                "nonce": self.rundir.order_secret.logged_nonce(digest),
            }

        def ordered(tag: str, verdict: Verdict) -> Verdict:
            sequential = {**verdict.details.get("sequential", {}), "order": self.order(tag)}
            sequential["order_from"] = order_from(tag)
            return replace(verdict, details={**verdict.details, "sequential": sequential})

        nulls = [as_null(ordered(tag, one(tag, None))) for tag in self.gated if tag in null_tags]
        floor = null_deltas(nulls)
        candidates = [self._held(ordered(tag, one(tag, floor))) for tag in self.gated if tag not in null_tags]
        return nulls, candidates

    def _held(self, verdict: Verdict) -> Verdict:
        """An accept of a session whose workers skipped rollouts this gate never stopped (a tag still not
        stopped at the end): what its floor or its own evidence was read on is not what the gate asked, so
        it is indecisive, those rollouts owed; the session that pays them decides."""
        unasked = sorted(self.unasked - self.stopped)
        if verdict.decision != ACCEPT or not unasked:
            return verdict
        line = (
            f"could not judge: rollouts of {', '.join(unasked)} were skipped as decided though this gate had "
            "not stopped them (its stop marker, a file in the run dir, was written by someone else, or a "
            "worker lied); run the same command again: it pays them and the gate decides"
        )
        return replace(verdict, decision=INDECISIVE, basis=Basis.COVERAGE, reason=line)

    def summary(self) -> list[str]:
        lines = []
        per_tag = self.plan.num_trials * len(self.plan.task_ids)
        for tag in self.gated:
            if tag not in self.decisions:
                continue
            (decision, followed), total = self.judged(tag), len(self.plan.task_ids)
            s = decision.state
            if decision.decided:
                how = f"stopped for {s.stopped} after {len(self.decided_on(tag, decision))} of {total} tasks"
            elif followed is not None:
                how = f"followed the candidates: stopped with them after {len(followed)} of {total} tasks"
            elif len(self.seen(tag)) == total:
                alpha = f"{float(self.alphas[tag]):.4g}"  # the whole α: the looks spent none of it
                how = f"no crossing over all {total} tasks: the exact test decided at α = {alpha}"
            else:
                how = f"undecided after {len(self.seen(tag))} of {total} tasks"
            lines.append(
                f"sequential {tag}: {how} (efficacy e = {s.efficacy:.4g}, futility e = {s.futility:.4g})"
            )
        if not self.gated:  # every candidate refused before any rollout: nothing was planned to stop
            return lines
        lines.append(
            f"sequential gate: the stop saved {self.saved} rollouts (of {per_tag * (len(self.gated) + 1)} "
            "planned for the gated tags and the best)"
        )
        return lines

    def finish(self) -> None:
        if self.plan.sequential is not None:
            markers.remove(markers.stop_path(self.rundir.root, self.plan.sequential))


def first_attempts(
    rundir: RunDir, split: str
) -> tuple[set[tuple[str, str, int]], dict[tuple[str, str, int], float]]:
    """From the log, of ``split``: the (tag, task, trial) whose first attempt was an infra error, and each
    one's first valid reward. A malformed event is left to the verdicts' check of who paid it."""
    seen: set[tuple[str, str, int]] = set()
    errored: set[tuple[str, str, int]] = set()
    first: dict[tuple[str, str, int], float] = {}
    for event in rundir.log.of_kinds(ROLLOUT):
        try:
            if event.get("split") != split:
                continue
            key = (str(event["tag"]), str(event["task_id"]), int(event["trial"]))
            valid = not event.get("infra_error") and event.get("reward") is not None
            if valid:
                first.setdefault(key, float(event["reward"]))  # type: ignore[arg-type]
            elif key not in seen:
                errored.add(key)
            seen.add(key)
        except (KeyError, TypeError, ValueError):
            continue
    return errored, first
