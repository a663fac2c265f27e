"""Verdicts in plain words, and the planning figures behind "what it would take".

Pure functions of reward matrices and verdicts, for ``capevolve plan`` and ``--capevolve-explain``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _stats as stats
from .._decide.basis import SCREENED, Basis
from .._stats.sign_flip import NOT_ESTIMABLE, NOT_ESTIMABLE_NO_NULLS
from .numbers import interval, num

POWER = 0.8


@dataclass(frozen=True)
class PlanFigures:
    """What ``capevolve plan`` computes from the best's rollouts (and the null controls')."""

    n: int  # val tasks with at least one valid trial of the best
    trials: int
    mean: float
    sd: float  # per-task paired-delta SD of a change that does nothing
    source: str  # where ``sd`` came from
    alpha: float
    icc: float | None
    headroom: float  # Σ(1 − rate): task-equivalents left to gain

    @property
    def z(self) -> float:
        return stats.detection_z(self.alpha, POWER)

    @property
    def mde(self) -> float:
        """The smallest true Δ̄ detected with probability 0.8 at ``alpha`` on ``n`` tasks."""
        return self.z * self.sd / math.sqrt(self.n)

    @property
    def estimable(self) -> bool:
        """False when the noise SD is exactly 0: an MDE scaled by no noise is not estimable."""
        return self.sd > 0

    @property
    def not_estimable(self) -> str:
        """What to say instead of an MDE when :attr:`estimable` is False."""
        return NOT_ESTIMABLE if self.source.endswith("null control(s)") else NOT_ESTIMABLE_NO_NULLS

    def tasks_for(self, effect: float) -> int | None:
        """Tasks needed for ``effect`` to be the MDE (None when no positive effect is given)."""
        if not effect > 0:
            return None
        return max(2, math.ceil((self.z * self.sd / effect) ** 2))


def plan_figures(
    best: np.ndarray, nulls: Sequence[np.ndarray], *, num_trials: int, alpha: float
) -> PlanFigures | None:
    """Figures from the best's and the null controls' reward matrices (a null's per-task delta
    is the noise a real change must beat; without nulls, the best's within-task variance); None
    with fewer than two val tasks rolled out."""
    means = stats.task_means(best)
    n = int(np.sum(~np.isnan(means)))
    if n < 2:
        return None
    components = stats.variance_components(best)
    deltas = [stats.paired_deltas(null, best)[0] for null in nulls]
    deltas = [d for d in deltas if d.size >= 2]
    if deltas:
        sd = float(np.sqrt(np.mean([np.var(d, ddof=1) for d in deltas])))
        source = f"{len(deltas)} null control(s)"
    else:
        sd = math.sqrt(2 * (components["within"] or 0.0) / num_trials)
        source = "within-task variance of the best (no null controls yet)"
    mean, headroom, icc = float(np.nanmean(means)), float(np.nansum(1 - means)), components["icc"]
    return PlanFigures(
        n=n, trials=num_trials, mean=mean, sd=sd, source=source, alpha=alpha, icc=icc, headroom=headroom
    )


def render_plan(best: str, figures: PlanFigures, target: float | None = None) -> list[str]:
    """``capevolve plan``'s lines."""
    f = figures
    lines = [
        f"best {best!r}: {f.n} val tasks × {f.trials} trials, mean {f.mean:.3f}",
        f"paired-delta SD per task {f.sd:.4f} (from {f.source})",
        f"minimum detectable effect at α = {f.alpha}, power {POWER}: Δ̄ ≈ {f.mde:.4f}"
        if f.estimable
        else f.not_estimable,
        f"intraclass correlation {f.icc:.2f}" if f.icc is not None else "intraclass correlation: n/a",
    ]
    if f.estimable:
        # A null's per-task delta is trial noise, so twice the trials or twice the tasks halve
        # its variance alike; only more tasks also average over how a real effect varies by task.
        lines.append(
            f"  twice the trials or twice the tasks → MDE ≈ {f.mde / math.sqrt(2):.4f}; prefer tasks"
        )
    lines.append(f"headroom: Σ(1 − rate) = {f.headroom:.1f} task-equivalents of {f.n}")
    if target is not None:
        need = (target - f.mean) * f.n
        verdict = "within" if need <= f.headroom else "beyond"
        lines.append(f"target mean {target}: needs {need:.1f} task-equivalents ({verdict} the headroom)")
    return lines


def explain(verdict: Any, figures: PlanFigures | None, *, null_control: bool = False) -> list[str]:
    """One verdict in plain words: what was compared, what the test says, and what it would
    take to decide (from ``figures``, the best's planning figures)."""
    v = verdict
    head = f"{v.tag} ({v.decision.upper()})"
    if null_control:
        head += f": a null control — a byte-identical copy of {v.against!r}, so its change is pure noise"
    if v.delta_mean is None:  # refused before any rollout, or nothing to pair
        return [f"{head}: nothing was compared — {v.reason}"]
    trials = f"{v.trials} trial(s) each" if v.trials else "its trials"
    lines = [
        head,
        f"  compared: {v.tag!r} against {v.against!r} on the same {v.n_tasks} {v.split} tasks, "
        f"{trials}, with the same trial seeds; the mean reward moved by {num(v.delta_mean, '+.4f')} "
        f"(95% CI {interval(v.ci, '+.4f')})",
        f"  the test ({v.mode}): {v.reason}",
    ]
    if figures is None or null_control or v.basis in (Basis.COVERAGE, *SCREENED):
        return lines
    if not figures.estimable:  # no noise measured: no power figure, no "about 2 tasks"
        return [*lines, f"  {figures.not_estimable}"]
    lines.append(
        f"  at n = {figures.n} tasks the gate detects a true change of Δ̄ ≈ {figures.mde:.4f} "
        f"4 times in 5 (α = {figures.alpha}, noise SD {figures.sd:.4f} per task from {figures.source})"
    )
    if v.decision != "accept":
        need = figures.tasks_for(v.delta_mean)
        if need is None:
            lines.append("  what it would take: nothing suggests it helps (Δ̄ ≤ 0); more data would not")
        else:
            lines.append(
                f"  what it would take: for a true Δ̄ of {v.delta_mean:+.4f} to be found 4 times in 5, "
                f"about {need} tasks (now {figures.n}); twice the trials or twice the tasks both bring the "
                f"MDE to ≈ {figures.mde / math.sqrt(2):.4f}, but only more tasks average over how a real "
                "effect varies by task — prefer tasks"
            )
    return lines
