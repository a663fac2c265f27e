"""The sequential gate's rule: stop paying once the answer is known, at either end.

After each task valid on both sides the paired delta feeds two e-processes: efficacy accepts at 1/α_e;
futility (against "at least ``gate_min_effect`` better") only rejects, so it cannot raise false accepts. At
exhaustion an accept also needs the joint p (:func:`.._stats.sequential.exhaustion_p`) ≤ α, so early and
final accepts are one test at level α. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np

from .._stats import sequential as seq
from .._stats.sign_flip import exceeds as stats_exceeds
from .alpha_budget import as_fraction
from .basis import Basis
from .verdict import ACCEPT, REJECT, Verdict

UNDECIDED = "undecided"
FOLLOWED = "followed"  # a null control that stopped with the candidates, without a crossing of its own
# Share of the gate's α the efficacy e-process crosses at: all of it, the exhaustion test being jointly
# calibrated; it costs that test ≤ 0.02 power at 5 trials per task, 0.062 at 1 (benchmarks/sequential.py;
# the stated bound is 0.08, tests/calibration/test_sequential_power.py).
EFFICACY_SHARE = Fraction(1)
ALPHA_FUTILITY = Fraction(1, 20)  # P(stopped for futility | effect ≥ min_effect) ≤ 0.05
EXHAUSTION_RESAMPLES = 20000


@dataclass(frozen=True)
class AlphaSplit:
    """One decision's levels: α, the efficacy crossing level α_e ≤ α, the level at exhaustion (α, jointly
    calibrated), and futility's α_f."""

    alpha: Fraction
    efficacy: Fraction
    exhaustion: Fraction
    futility: Fraction

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


def split(alpha: float | Fraction, share: Fraction = EFFICACY_SHARE) -> AlphaSplit:
    total = as_fraction(alpha)
    return AlphaSplit(total, total * share, total, ALPHA_FUTILITY)


@dataclass(frozen=True)
class SequentialDecision:
    state: seq.SequentialState
    alpha: AlphaSplit
    min_effect: float
    total_tasks: int
    # fed the worst case: each trial whose first attempt was an infra error a failure of the candidate and a
    # pass of the best (an efficacy crossing on the valid trials alone, with errors among them, is not one)
    imputed: bool = False

    @property
    def decided(self) -> bool:
        return self.state.stopped in (seq.EFFICACY, seq.FUTILITY)

    def numbers(self) -> dict[str, Any]:
        s = self.state
        return {
            "outcome": s.stopped,
            "tasks_seen": s.tasks,
            "tasks_total": self.total_tasks,
            "e_efficacy": s.efficacy,
            "e_futility": s.futility,
            "threshold_efficacy": float(1 / self.alpha.efficacy),
            "threshold_futility": float(1 / self.alpha.futility),
            "min_effect": self.min_effect,
            "alpha_split": self.alpha.to_dict(),
            **({"infra_errors_at_worst": True} if self.imputed else {}),
        }


def track(
    deltas: np.ndarray | list[float], *, alpha: AlphaSplit, min_effect: float, total_tasks: int
) -> SequentialDecision:
    state = seq.run(
        np.asarray(deltas, dtype=float),
        alpha_efficacy=float(alpha.efficacy),
        alpha_futility=float(alpha.futility),
        min_effect=min_effect,
    )
    return SequentialDecision(state, alpha, min_effect, total_tasks)


def early_verdict(
    exhaustion_verdict: Verdict, decision: SequentialDecision, *, veto_regressions: bool = False
) -> Verdict:
    """The verdict of a gate stopped by a crossing: the numbers of the tasks it saw and the e-process's
    decision; an efficacy crossing still answers to the null floor and the regression veto."""
    s = decision.state
    v = exhaustion_verdict
    spread = v.null_spread
    if s.stopped == seq.EFFICACY and spread is not None and not _exceeds_floor(v):
        outcome, basis = REJECT, Basis.NULL_FLOOR
        reason = (
            f"efficacy e-value {s.efficacy:.4g} crossed after {s.tasks} tasks, but Δ̄ = "
            f"{v.delta_mean:+.4f} does not exceed the null controls' own spread {spread:.4f}"
        )
    elif s.stopped == seq.EFFICACY and veto_regressions and v.regressions:
        outcome, basis = REJECT, Basis.REGRESSION_VETO
        reason = (
            f"efficacy e-value {s.efficacy:.4g} crossed, but vetoed: {len(v.regressions)} task(s) the "
            f"best passed dropped by more than their own noise"
        )
    elif s.stopped == seq.EFFICACY:
        outcome, basis = ACCEPT, Basis.SEQUENTIAL_EFFICACY
        reason = (
            f"efficacy e-value {s.efficacy:.4g} ≥ 1/α_e = {float(1 / decision.alpha.efficacy):g} "
            f"after {s.tasks} of {decision.total_tasks} tasks (anytime-valid at α = "
            f"{float(decision.alpha.alpha):g})"
        )
        if decision.imputed:
            reason += ", each infra error read as a failure of the candidate and a pass of the best"
    else:
        outcome, basis = REJECT, Basis.SEQUENTIAL_FUTILITY
        reason = (
            f"futility e-value {s.futility:.4g} ≥ 1/α_f = {float(1 / decision.alpha.futility):g} "
            f"after {s.tasks} of {decision.total_tasks} tasks: the candidate is not "
            f"{decision.min_effect:+g} better (gate_min_effect); stopped paying"
        )
    return replace(
        exhaustion_verdict,
        decision=outcome,
        basis=basis,
        reason=reason,
        alpha=float(decision.alpha.alpha),
        details={**exhaustion_verdict.details, "sequential": decision.numbers()},
    )


def _exceeds_floor(v: Verdict) -> bool:
    """The null floor on the verdict's fractions (its floats where a fraction was not recorded)."""
    delta = v.delta_exact if v.delta_exact is not None else v.delta_mean
    spread = v.null_spread_exact if v.null_spread_exact is not None else v.null_spread
    return stats_exceeds(*(None if x is None else Fraction(x) for x in (delta, spread)))


def exhausted_verdict(verdict: Verdict, decision: SequentialDecision, p_joint: Fraction) -> Verdict:
    """Val exhausted without a crossing: the exact gate's verdict; an accept also needs ``p_joint`` ≤ α."""
    alpha = decision.alpha.alpha
    numbers = {**decision.numbers(), "p_joint": float(p_joint), "p_joint_exact": str(p_joint)}
    note = (
        f"; no e-process crossed over {decision.state.tasks} tasks (efficacy e = "
        f"{decision.state.efficacy:.4g}); joint sequential p = {float(p_joint):.4g}"
    )
    if verdict.decision == ACCEPT and p_joint > alpha:
        return replace(
            verdict,
            decision=REJECT,
            basis=Basis.SEQUENTIAL_EXHAUSTION,
            reason=f"{verdict.reason}{note} > α = {float(alpha):g}: the early looks used the margin",
            details={**verdict.details, "sequential": numbers},
        )
    return replace(verdict, reason=verdict.reason + note, details={**verdict.details, "sequential": numbers})


def followed_verdict(verdict: Verdict, tasks: int) -> Verdict:
    """A null control stopped once the candidates were decided: its exhaustion verdict on the ``tasks`` it
    completed (its Δ̄ there is the null floor's), said so. A shorter prefix makes its |Δ̄| noisier, the floor
    stricter: the floor only turns accepts into rejects."""
    sequential = {**verdict.details.get("sequential", {}), "outcome": FOLLOWED, "followed_tasks": tasks}
    total = sequential.get("tasks_total")
    return replace(
        verdict,
        reason=f"followed the candidates: stopped with them after {tasks} of {total} tasks; {verdict.reason}",
        details={**verdict.details, "sequential": sequential},
    )


def undecided_verdict(verdict: Verdict, decision: SequentialDecision) -> Verdict:
    """An interrupted sequential gate: its e-values and "undecided", never a decision it did not reach."""
    s = decision.state
    return replace(
        verdict,
        decision=UNDECIDED,
        basis=Basis.INTERRUPTED,
        reason=(
            f"interrupted after {s.tasks} of {decision.total_tasks} tasks: undecided (efficacy "
            f"e-value {s.efficacy:.4g} < {float(1 / decision.alpha.efficacy):g}, futility e-value "
            f"{s.futility:.4g} < {float(1 / decision.alpha.futility):g}); re-run to continue"
        ),
        details={**verdict.details, "sequential": {**decision.numbers(), "outcome": UNDECIDED}},
    )
