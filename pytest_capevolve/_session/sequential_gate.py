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
from .._decide.verdict import GateConfig, Verdict
from .._items.nodes import CONTEXT_KEY, SEQUENTIAL_SKIP, item_name
from .._items.plan import EvalPlan
from .._policy.gate.verdicts import Evidence, as_null, null_deltas
from .._project.spec import Spec
from .._stats import sequential as seq
from .._store.readers.evidence import ByTag
from .._store.rollouts.record import RolloutRecord, record_from_report
from .._store.rundir import RunDir
from .._store.sessions import markers


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
    saved: int = 0  # items skipped because their tag was decided: rollouts not paid
    # (decisions, accepts) of the run's α budget when the shares in ``alphas`` were read
    budget_at_start: tuple[int, tuple[int, ...]] | None = None
    _tag_of: dict[str, str] = field(default_factory=dict, repr=False)  # item name → its tag (not_sent)

    def __post_init__(self) -> None:
        tags, task_ids = {self.best, *self.gated}, set(self.plan.task_ids)
        persisted = self.rundir.rollouts.indexed_rollouts(self.plan.split, tags, self.plan.block)
        for record in persisted:  # resume: persisted counts
            if record.tag in tags and record.task_id in task_ids:
                self._add(record)
        self._update(self.gated)  # a tag decided by an earlier session is stopped before paying

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        session.config.stash[CONTEXT_KEY].stopped |= self.stopped

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = record_from_report(report)
        if record is not None and report.when == "call":
            self._add(record)
            # only a task completed on both sides can move an e-process: the best's completes
            # it for every tag, a candidate's for itself
            if self._complete(record.tag, record.task_id):
                self._update(self.gated if record.tag == self.best else [record.tag])
        elif report.skipped and SEQUENTIAL_SKIP in str(report.longrepr):
            self.saved += 1

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
        reward = None if record.infra_error or record.reward is None else float(record.reward)
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

    def horizon(self) -> list[str] | None:
        """Once every candidate is decided: the session's order up to the last task of their decided
        prefixes, what a null control completes before it follows them (None before)."""
        candidates = [t for t in self.gated if t not in self.nulls]
        if not candidates or not all(t in self.decisions and self.decisions[t].decided for t in candidates):
            return None
        needed = {t for c in candidates for t in self.prefix(c, self.decisions[c].state.tasks)}
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
        seen = self.seen(tag) if seen is None else seen
        return seqgate.track(
            self.deltas(tag, seen),
            alpha=seqgate.split(self.alphas[tag]),
            min_effect=self.spec.gate_min_effect,
            total_tasks=len(self.plan.task_ids),
        )

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
        exhausted: the exact test at the α left; interrupted: "undecided" with the current e-values."""

        def one(tag: str, floor: list[float | Fraction] | None) -> Verdict:
            decision, followed = self.judged(tag)
            level = replace(config, alpha=decision.alpha.alpha)
            early = decision.decided or interrupted
            seen = self.prefix(tag, decision.state.tasks) if early else followed or self.plan.task_ids
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
        candidates = [ordered(tag, one(tag, floor)) for tag in self.gated if tag not in null_tags]
        return nulls, candidates

    def summary(self) -> list[str]:
        lines = []
        per_tag = self.plan.num_trials * len(self.plan.task_ids)
        for tag in self.gated:
            if tag not in self.decisions:
                continue
            (decision, followed), total = self.judged(tag), len(self.plan.task_ids)
            s = decision.state
            if decision.decided:
                how = f"stopped for {s.stopped} after {len(self.prefix(tag, s.tasks))} of {total} tasks"
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
