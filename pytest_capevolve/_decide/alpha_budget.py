"""The val-reuse α budget: how much false-accept risk each gate decision on one val split gets.

A loop that gates hundreds of candidates on the same val tasks leaks a little of val into the
best with every decision (Dwork et al. 2015; Blum & Hardt 2015). With ``constant`` every
decision is taken at α — today's behaviour, right for people who gate once, but over J null
candidates the chance that some null is accepted grows towards 1 − (1 − α)^J. With ``basel``
the j-th decision (j = 1, 2, …) gets α_j = α·6/(π² j²); Σ_j α_j = α, so by the union bound the
chance that *any* decision of the run is a false accept stays ≤ α, however long the loop runs.

With ``lord`` (LORD++, Ramdas, Yang, Wainwright & Jordan 2017) α is earned back on accepts:
the j-th decision gets α_j = γ_j·W₀ + (α − W₀)·γ_{j−τ₁} + α·Σ_{k≥2} γ_{j−τ_k}, where τ_k is
the decision number of the k-th accept and γ_i = 6/(π² i²). With W₀ = α (the largest LORD++
allows) its levels are ``basel``'s until the first accept — so a loop of nulls accepts one with
probability ≤ α, as under ``basel`` — and each accept after that earns α back: the level never
falls below ``basel``'s. Its promise on the accepts: Σ_{i≤j} α_i ≤ α·max(1, accepts so far) at
every j (the property that bounds the false-discovery rate by α under independence).
``benchmarks/loop_alpha.py`` compares the three on a simulated 100-decision loop.

Pure: one function per question, so other spenders (a per-candidate look-spending grow, a
sequential gate's split) compose with :func:`alpha_for` rather than re-deriving it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

SCHEDULES = ("constant", "basel", "lord")  # the spec's gate_alpha_schedule choices
# What hill-climb and the agent hand-off gate with when the spec names no schedule (the spec's
# own default stays ``constant``, for people who gate once). Chosen by benchmarks/loop_alpha.py
# (200 loops × 100 decisions, seed 2026; docs/explanation/alpha-across-a-run.md has the table):
# both spending rules keep P(any false accept) ≤ α (0.035) where constant reaches 0.515, and
# lord, basel's levels until a first accept and never below them after, accepted as many true
# improvements (0.645 vs 0.640 per loop) and earns more in a loop that keeps finding them.
LOOP_SCHEDULE = "lord"

# 6/π² as an exact-enough fraction: α_j is decided on rationals, like the exact gate's p-values.
# Rounded *down*, so Σ_j α_j stays ≤ α exactly.
_SIX_OVER_PI_SQ = Fraction(math.floor(6 / math.pi**2 * 10**12), 10**12)


def _gamma(i: int) -> Fraction:
    """LORD++'s spending sequence: γ_i = 6/(π² i²) (non-increasing, Σ_i γ_i ≤ 1), ``basel``'s:
    front-loaded, because a loop's first accept must come early for LORD to earn anything (the
    slowly decaying C·log(i)/(i·e^√(log i)) of Javanmard & Montanari, tried on 20 loops of
    benchmarks/loop_alpha.py, accepted fewer true improvements)."""
    return _SIX_OVER_PI_SQ / (i * i)


def alpha_for(schedule: str, alpha: float | Fraction, decision: int, accepts: Iterable[int] = ()) -> Fraction:
    """The α the ``decision``-th gate decision on this run's val split gets (1-based).
    ``accepts``: the numbers of the earlier decisions that accepted (``lord`` earns α back on
    them; the other schedules ignore them)."""
    if decision < 1:
        raise ValueError(f"decisions are numbered from 1, got {decision}")
    base = alpha if isinstance(alpha, Fraction) else Fraction(str(alpha))
    if schedule == "constant":
        return base
    if schedule == "basel":
        return base * _SIX_OVER_PI_SQ / (decision * decision)
    if schedule == "lord":
        earlier = sorted(j for j in set(accepts) if 1 <= j < decision)
        wealth0 = base  # W₀ = α: basel's levels until the first accept
        level = _gamma(decision) * wealth0
        for k, tau in enumerate(earlier):
            level += (base - wealth0 if k == 0 else base) * _gamma(decision - tau)
        return level
    raise ValueError(f"unknown gate_alpha_schedule {schedule!r}; use one of {', '.join(SCHEDULES)}")


def round_alpha(
    schedule: str, alpha: float | Fraction, decided: int, siblings: int, accepts: Sequence[int] = ()
) -> Fraction:
    """The family α of a round deciding ``siblings`` candidates after ``decided`` earlier
    decisions: α itself under ``constant`` (today's one family-wise α per round), else the sum
    of the slots the round uses, α_{decided+1} + … + α_{decided+siblings} (under ``lord``
    earned on the accepts before the round only: an accept inside it can only raise a level,
    so leaving it out keeps the promise)."""
    if schedule == "constant":
        return alpha_for(schedule, alpha, decided + 1)
    return sum(
        (alpha_for(schedule, alpha, decided + i, accepts) for i in range(1, max(siblings, 1) + 1)),
        Fraction(0),
    )


def mde(alpha: float, n_tasks: int, sd_delta: float, power: float = 0.8) -> float | None:
    """The smallest mean per-task delta a one-sided paired test at ``alpha`` detects with
    ``power`` on ``n_tasks`` tasks whose deltas spread by ``sd_delta`` (normal approximation:
    a planning figure, not a decision rule)."""
    if n_tasks < 1 or not 0 < alpha < 1:
        return None
    from .._stats.intervals import detection_z  # numpy: here, not where budgets are only counted

    return detection_z(alpha, power) * sd_delta / math.sqrt(n_tasks)


def any_false_accept_bound(schedule: str, alpha: float, decisions: int) -> float:
    """An upper bound on P(some null among ``decisions`` is accepted) when every candidate is
    a null: Σ α_j, capped at 1 (under ``lord`` the levels before a first accept)."""
    total = sum(float(alpha_for(schedule, alpha, j)) for j in range(1, decisions + 1))
    return min(1.0, total)


DECISION_EVENT = "gate_decision"  # one per candidate verdict a gate session writes on val


def decisions_so_far(events: list[dict]) -> int:
    """How many gate decisions on val the run has made (its ``gate_decision`` events)."""
    return sum(1 for e in events if e.get("kind") == DECISION_EVENT)


def accepted_decisions(events: list[dict]) -> list[int]:
    """The numbers j of the run's gate decisions on val that accepted (what ``lord`` earns on)."""
    return [
        int(e["j"])
        for e in events
        if e.get("kind") == DECISION_EVENT and e.get("decision") == "accept" and e.get("j") is not None
    ]


def slot_problems(events: list[dict], alpha: float | Fraction | None = None) -> list[str]:
    """One line per ``gate_decision`` that took a level another decision of the run had taken
    (what ``capevolve verify`` says of the budget): the j-th decision must be numbered j — two
    numbered alike were judged at once from the same budget — and, when the run's α is known,
    its α_j must be its schedule's level for j after the accepts before it."""
    problems: list[str] = []
    seen: dict[int, dict] = {}
    accepts: list[int] = []
    n = 0
    for event in events:
        if event.get("kind") != DECISION_EVENT:
            continue
        n += 1
        j, where = event.get("j"), f"gate_decision seq {event.get('seq')} ({event.get('tag')!r})"
        if not isinstance(j, int) or j != n:
            earlier = seen.get(j) if isinstance(j, int) else None
            taken = (
                f", the level decision seq {earlier.get('seq')} ({earlier.get('tag')!r}) took"
                if earlier
                else ""
            )
            problems.append(
                f"{where}: numbered j = {j}{taken}, but it is decision {n} on val: two decisions were "
                "judged from one state of the α budget, and this one at a level not its own"
            )
        elif (
            alpha is not None and isinstance(event.get("schedule"), str) and event.get("alpha_j") is not None
        ):
            with contextlib.suppress(ValueError):
                due = float(alpha_for(str(event["schedule"]), alpha, j, accepts))
                if float(event["alpha_j"]) != due:
                    problems.append(
                        f"{where}: α_j = {event['alpha_j']}, but its schedule gives decision {j} "
                        f"α = {due:.6g}"
                    )
        if isinstance(j, int):
            seen.setdefault(j, event)
            if event.get("decision") == "accept":
                accepts.append(j)
    return problems
