"""The val-reuse α budget: how much false-accept risk each gate decision on one val split gets.

A loop that gates hundreds of candidates on the same val tasks leaks a little of val into the
best with every decision (Dwork et al. 2015; Blum & Hardt 2015). With ``constant`` every
decision is taken at α — today's behaviour, right for people who gate once, but over J null
candidates the chance that some null is accepted grows towards 1 − (1 − α)^J. With ``basel``
the j-th decision (j = 1, 2, …) gets α_j = α·6/(π² j²); Σ_j α_j = α, so by the union bound the
chance that *any* decision of the run is a false accept stays ≤ α, however long the loop runs.

Pure: one function per question, so other spenders (a per-candidate look-spending grow, a
sequential gate's split) compose with :func:`alpha_for` rather than re-deriving it.
"""

from __future__ import annotations

import math
from fractions import Fraction

SCHEDULES = ("constant", "basel")  # the spec's gate_alpha_schedule choices

# 6/π² as an exact-enough fraction: α_j is decided on rationals, like the exact gate's p-values.
# Rounded *down*, so Σ_j α_j stays ≤ α exactly.
_SIX_OVER_PI_SQ = Fraction(math.floor(6 / math.pi**2 * 10**12), 10**12)


def alpha_for(schedule: str, alpha: float | Fraction, decision: int) -> Fraction:
    """The α the ``decision``-th gate decision on this run's val split gets (1-based)."""
    if decision < 1:
        raise ValueError(f"decisions are numbered from 1, got {decision}")
    base = alpha if isinstance(alpha, Fraction) else Fraction(str(alpha))
    if schedule == "constant":
        return base
    if schedule == "basel":
        return base * _SIX_OVER_PI_SQ / (decision * decision)
    raise ValueError(f"unknown gate_alpha_schedule {schedule!r}; use one of {', '.join(SCHEDULES)}")


def round_alpha(schedule: str, alpha: float | Fraction, decided: int, siblings: int) -> Fraction:
    """The family α of a round deciding ``siblings`` candidates after ``decided`` earlier
    decisions: α itself under ``constant`` (today's one family-wise α per round), else the sum
    of the slots the round uses, α_{decided+1} + … + α_{decided+siblings}."""
    if schedule == "constant":
        return alpha_for(schedule, alpha, decided + 1)
    return sum((alpha_for(schedule, alpha, decided + i) for i in range(1, max(siblings, 1) + 1)), Fraction(0))


def mde(alpha: float, n_tasks: int, sd_delta: float, power: float = 0.8) -> float | None:
    """The smallest mean per-task delta a one-sided paired test at ``alpha`` detects with
    ``power`` on ``n_tasks`` tasks whose deltas spread by ``sd_delta`` (normal approximation:
    a planning figure, not a decision rule)."""
    if n_tasks < 1 or not 0 < alpha < 1:
        return None
    from scipy import stats as sps  # here, not at import: scipy.stats takes about a second

    z = float(sps.norm.ppf(1 - alpha) + sps.norm.ppf(power))
    return z * sd_delta / math.sqrt(n_tasks)


def any_false_accept_bound(schedule: str, alpha: float, decisions: int) -> float:
    """An upper bound on P(some null among ``decisions`` is accepted): Σ α_j, capped at 1."""
    total = sum(float(alpha_for(schedule, alpha, j)) for j in range(1, decisions + 1))
    return min(1.0, total)


DECISION_EVENT = "gate_decision"  # one per candidate verdict a gate session writes on val


def decisions_so_far(events: list[dict]) -> int:
    """How many gate decisions on val the run has made (its ``gate_decision`` events)."""
    return sum(1 for e in events if e.get("kind") == DECISION_EVENT)
