"""Summaries for people: the per-tag table printed at the end of a session (controller only;
formatting never raises into pytest's terminal summary)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .. import _stats as stats
from .._decide.alpha_budget import shown_decision
from .._store.readers import evidence
from .numbers import aligned, interval, num, usd


@dataclass
class TagRow:
    """One row of the per-tag table (:func:`render_arms`): a tag's arm on one split."""

    tag: str
    split: str
    tasks: int
    trials: int
    mean: float | None
    se: float | None
    coverage: float
    pass_k: float | None
    pass_at_k: float | None
    paid: int
    reused: int
    infra: int
    cost_usd: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize_arm(
    arm: evidence.Arm,
    *,
    tag: str,
    split: str,
    task_ids: Sequence[str],
    num_trials: int,
    paid: int,
    reused: int,
) -> TagRow:
    arrays = _arm_arrays(arm, task_ids, num_trials)
    return arm_summary(
        arrays, tag=tag, split=split, tasks=len(task_ids), num_trials=num_trials, paid=paid, reused=reused
    )


def arm_summary(
    arrays: tuple[np.ndarray, np.ndarray, int, float],
    *,
    tag: str,
    split: str,
    tasks: int,
    num_trials: int,
    paid: int,
    reused: int,
) -> TagRow:
    """The row of an arm laid out as (reward matrix, pass matrix, infra errors, cost): from
    :func:`_arm_arrays`, or :meth:`..decide.evidence.Outcomes.arm_arrays` for a whole session."""
    rewards, passes, infra, cost = arrays
    mean, se = stats.mean_se(stats.task_means(rewards))
    return TagRow(
        tag=tag,
        split=split,
        tasks=tasks,
        trials=num_trials,
        mean=mean,
        se=se,
        coverage=stats.coverage(rewards),
        pass_k=stats.pass_hat_k(passes, num_trials),
        pass_at_k=stats.pass_at_k(passes, num_trials),
        paid=paid,
        reused=reused,
        infra=infra,
        cost_usd=cost,
    )


def _arm_arrays(
    arm: evidence.Arm, task_ids: Sequence[str], num_trials: int
) -> tuple[np.ndarray, np.ndarray, int, float]:
    """In one pass: the reward and pass matrices, infra errors and cost of the planned records."""
    rows = {task_id: i for i, task_id in enumerate(task_ids)}
    rewards = np.full((len(task_ids), num_trials), np.nan)
    passes = np.full((len(task_ids), num_trials), np.nan)
    infra, cost = 0, 0.0
    for (task_id, k), record in arm.items():
        row = rows.get(task_id)
        if row is None or k >= num_trials:
            continue
        cost += record.cost_usd
        if record.infra_error is not None:
            infra += 1
        elif record.reward is not None:
            rewards[row, k] = float(record.reward)
            passes[row, k] = float(record.passed)  # type: ignore[arg-type]
    return rewards, passes, infra, cost


def render_arms(rows: Sequence[TagRow]) -> list[str]:
    """A fixed-width table, one line per tag."""
    header = (*"tag split tasks trials mean SE coverage pass^k pass@k paid reused infra".split(), "cost $")
    body = []
    for r in rows:
        rates = (f"{r.coverage:.0%}", f"{num(r.pass_k)} (k={r.trials})", num(r.pass_at_k))
        spent = (str(r.paid), str(r.reused), str(r.infra), usd(r.cost_usd, r.paid + r.reused))
        body.append((r.tag, r.split, str(r.tasks), str(r.trials), num(r.mean), num(r.se), *rates, *spent))
    return aligned([header, *body], left=2)


# One line under each table, so its words need no manual: the arms' SE is each arm's own, the
# verdicts' SE is the paired one, and they are not the same number.
ARMS_LEGEND = (
    "mean, SE: each arm's mean reward over tasks and its own (unpaired) standard error; "
    "pass^k, pass@k: the chance that k fresh trials of a task all pass, that at least one does; "
    "infra: rollouts that measured nothing (missing data)"
)
VERDICTS_LEGEND = (
    "Δ̄: mean per-task difference from {against} on the same trial seeds; SE: its paired standard error; "
    "bar: what Δ̄ had to clear (at least the null controls' spread); a REJECT names the rule that decided it"
)


def render_verdicts(verdicts: Sequence[Any], against: str | None = None) -> list[str]:
    """One line per verdict: decision, the numbers it rests on, and its reason (a reject's
    prefixed with the rule that decided it, its basis: ``exact``, ``null_floor``, ...). Under a
    heading that names ``against``, a verdict gated against another tag (a sibling re-gated after
    its round's accept) says which: its Δ̄ is not from ``against``."""
    header = ("tag", "decision", "n", "Δ̄", "SE", "95% CI", "p", "bar", "reason")
    body = []
    for v in verdicts:
        tag = v.tag if against is None or v.against in (None, against) else f"{v.tag} (vs {v.against})"
        decision = shown_decision(v.decision, v.basis, v.delta_mean, (v.details or {}).get("looks")).upper()
        numbers = (num(v.delta_mean, "+.4f"), num(v.se, ".4f"), interval(v.ci), num(v.p_value, ".4g"))
        reason = f"by {v.basis}: {v.reason}" if v.decision == "reject" and v.basis else v.reason
        body.append((tag, decision, str(v.n_tasks), *numbers, num(v.bar, ".4f"), reason))
    return aligned([header, *body], left=len(header))
