"""How much of a paired delta's variance is the judge's, and how much the agent's.

A reward is the mean of r re-scores, ``y = a + e̅``: the judge's variance of Δ̄ comes from the re-scores
alone, the total is ``var(d) / n``, the agent's is the rest. One more re-score beats one more trial per unit
cost exactly when r < r* = √(ρ·σ²_j/σ²_a), ρ = c_agent/c_judge (the two-stage optimum); without a cost ratio
ρ = r is assumed. Pure."""

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


def arm_within(rescores: np.ndarray) -> tuple[float, float]:
    """(judge part, total) of the within-task variance of one task-arm mean from its K×r scores (K < 2: the
    judge part stands in for the total)."""
    scores = np.asarray(rescores, dtype=float)
    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError("the judge's variance needs at least two re-scores per rollout")
    k, r = scores.shape
    judge = float(np.mean(np.var(scores, axis=1, ddof=1))) / (k * r)
    means = scores.mean(axis=1)
    total = float(np.var(means, ddof=1)) / k if k >= 2 else judge
    return judge, total


def split(
    deltas: np.ndarray, judge_var_per_task: np.ndarray, within_per_task: np.ndarray, rescores: int
) -> JudgeSplit:
    """The split of Var(Δ̄) for ``deltas`` whose judge part of Var(d_t) is ``judge_var_per_task``."""
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


def best_rescores(
    within_judge: float, within_total: float, rescores: int, cost_ratio: float | None = None
) -> float | None:
    """r* = √(ρ·σ²_j/σ²_a) from the within-task variances, ρ = ``cost_ratio`` (None: r). None when nothing
    is measured; ∞ when the agent shows no noise."""
    if within_total <= 0 or within_judge < 0:
        return None
    ratio = float(rescores if cost_ratio is None else cost_ratio)
    judge = within_judge * rescores
    agent = within_total - within_judge
    if agent <= 0:
        return float("inf") if judge > 0 else None
    return float(np.sqrt(ratio * judge / agent))


@dataclass(frozen=True)
class RescoreAdvice:
    rescores: int
    cost_ratio: float
    cost_ratio_assumed: bool  # no ratio given: ρ = r assumed
    best: float | None  # r*
    low: float | None  # its 90 % bootstrap interval over tasks
    high: float | None
    answer: str  # "rescores", "trials" or "uncertain"

    @property
    def text(self) -> str:
        assumed = " (assumed: a rollout costs r judge calls)" if self.cost_ratio_assumed else ""
        if self.best is None:
            return "no within-task variance measured: nothing to advise"
        interval = (
            f"r* = {self.best:.2g} [90 % CI {self.low:.2g}, {self.high:.2g}] at cost ratio "
            f"{self.cost_ratio:g}{assumed}"
        )
        if self.answer == "rescores":
            return (
                f"more re-scores (judge_rescores) buy more than more trials: r = {self.rescores} < {interval}"
            )
        if self.answer == "trials":
            return f"more trials (or tasks) buy more than more re-scores: r = {self.rescores} > {interval}"
        return f"uncertain: r = {self.rescores} lies within {interval}; either buys about as much"


def rescore_advice(
    judge_per_task: np.ndarray,
    within_per_task: np.ndarray,
    rescores: int,
    cost_ratio: float | None = None,
    *,
    seed: int = 0,
    resamples: int = 2000,
) -> RescoreAdvice:
    """r* with a seeded 90 % bootstrap interval over tasks, and the answer: more re-scores above r, more
    trials below, else uncertain."""
    judge = np.asarray(judge_per_task, dtype=float)
    # not clipped per task (a task's K-rollout spread is noisy, often below its judge part):
    # clipping would inflate the agent's variance and pull r* down
    within = np.asarray(within_per_task, dtype=float)
    ratio = float(rescores if cost_ratio is None else cost_ratio)
    best = best_rescores(float(np.mean(judge)), float(np.mean(within)), rescores, ratio)
    low = high = best
    if best is not None and judge.size >= 2:
        rng = np.random.default_rng(seed)
        rows = rng.integers(0, judge.size, size=(resamples, judge.size))
        mj, mw = judge[rows].mean(axis=1), within[rows].mean(axis=1)
        agent = mw - mj
        with np.errstate(divide="ignore", invalid="ignore"):
            draws = np.where(
                agent > 0, np.sqrt(ratio * mj * rescores / np.where(agent > 0, agent, 1)), np.inf
            )
        low = float(np.quantile(draws, 0.05, method="lower"))  # no interpolation: draws may be ∞
        high = float(np.quantile(draws, 0.95, method="higher"))
    answer = "uncertain"
    if best is not None and low is not None and high is not None:
        answer = "rescores" if low > rescores else "trials" if high < rescores else "uncertain"
    return RescoreAdvice(rescores, ratio, cost_ratio is None, best, low, high, answer)
