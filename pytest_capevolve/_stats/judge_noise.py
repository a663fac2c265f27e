"""How much of a paired delta's variance is the judge's, and how much the agent's.

Pure functions on numpy arrays. The model: a rollout's reward is the mean of r re-scores of one
output, ``y = a + e̅`` with the agent's outcome ``a`` and the judge's noise ``e`` (mean 0,
variance σ²_j, independent across re-scores and rollouts). A task's mean over K rollouts then
has variance σ²_a/K + σ²_j/(K·r) within the task, and the paired delta d_t = m_t(c) − m_t(b)
carries the judge's part of both arms.

- The **judge's** variance of Δ̄ is estimated from the re-scores alone: each rollout's sample
  variance across its r scores is unbiased for σ²_j, so
  ``V_judge = Σ_t Σ_arm mean_k(s²_tk) / (K_t,arm · r) / n²``.
- The **total** is the usual ``SE² = var(d, ddof=1) / n``: it already holds the judge's part,
  because every d_t was computed from averaged re-scores (nothing to add for the gate to
  account for both; the split says how much of it is whose).
- The **agent's** share is the rest (the agent's trial-to-trial spread and the task-to-task
  spread of the true deltas).

Where the judge's share of the *within-task* variance is the larger one, a re-score (one judge
call) removes more variance per unit spent than a trial (a rollout and its judge calls): that
is what :func:`rescores_pay_more` says.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class JudgeSplit:
    n_tasks: int
    rescores: int
    var_total: float  # SE² of Δ̄ over tasks
    var_judge: float  # the judge's part of it
    var_agent: float  # the rest
    within_judge: float  # mean over tasks of the judge's within-task variance (both arms)
    within_total: float  # mean over tasks of the total within-task variance of m_t (both arms)

    @property
    def judge_share(self) -> float:
        return 0.0 if self.var_total <= 0 else min(1.0, self.var_judge / self.var_total)

    @property
    def agent_share(self) -> float:
        return 1.0 - self.judge_share


def rollout_judge_variances(rescores: np.ndarray) -> np.ndarray:
    """Per rollout (rows), the sample variance of its r re-scores (columns); r ≥ 2."""
    scores = np.asarray(rescores, dtype=float)
    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError("the judge's variance needs at least two re-scores per rollout")
    return np.var(scores, axis=1, ddof=1)


def arm_within(rescores: np.ndarray) -> tuple[float, float]:
    """(judge part, total) of the within-task variance of one task-arm mean, from its K×r
    scores: judge = mean_k s²_k / (K r); total = var of the K rollout means / K (K ≥ 2, else
    the judge part stands in for it)."""
    scores = np.asarray(rescores, dtype=float)
    k, r = scores.shape
    judge = float(np.mean(rollout_judge_variances(scores))) / (k * r)
    means = scores.mean(axis=1)
    total = float(np.var(means, ddof=1)) / k if k >= 2 else judge
    return judge, total


def split(
    deltas: np.ndarray, judge_var_per_task: np.ndarray, within_per_task: np.ndarray, rescores: int
) -> JudgeSplit:
    """The split of Var(Δ̄) for paired deltas ``deltas`` (one per task) whose judge part of
    Var(d_t) is ``judge_var_per_task`` (both arms summed: :func:`arm_within`)."""
    d = np.asarray(deltas, dtype=float)
    judge = np.asarray(judge_var_per_task, dtype=float)
    within = np.asarray(within_per_task, dtype=float)
    n = d.size
    if n < 2 or judge.shape != d.shape or within.shape != d.shape:
        raise ValueError("the split needs at least two tasks, with one judge variance per task")
    var_total = float(np.var(d, ddof=1)) / n
    var_judge = float(np.sum(judge)) / n**2
    return JudgeSplit(
        n_tasks=n,
        rescores=rescores,
        var_total=var_total,
        var_judge=min(var_judge, var_total) if var_total > 0 else var_judge,
        var_agent=max(0.0, var_total - var_judge),
        within_judge=float(np.mean(judge)),
        within_total=float(np.mean(np.maximum(within, judge))),
    )


def rescores_pay_more(result: JudgeSplit) -> bool:
    """True where the judge's noise is the larger part of the within-task variance: doubling
    the re-scores then removes more variance per judge call than doubling the trials does per
    rollout (a trial pays the agent too)."""
    return result.within_total > 0 and result.within_judge / result.within_total > 0.5
