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

With ``addis`` (ADDIS with discarding only, λ = 0: Tian & Ramdas, "ADDIS: an adaptive
discarding algorithm for online FDR control with conservative nulls", NeurIPS 2019; its FWER
form, ADDIS-spending, in Tian & Ramdas, "Online control of the familywise error rate",
Statistical Methods in Medical Research 30(4), 2021) a decision whose Δ̄ is below 0 — a clear
non-improvement, p > 1/2 — is *discarded*: it spends nothing, and the clock does not tick. The
j-th decision gets τ times LORD++'s level on the clock of the decisions that counted,
α_j = τ·[γ_{c_j}·W₀ + (α − W₀)·γ_{c_j−c(τ₁)} + α·Σ_{k≥2} γ_{c_j−c(τ_k)}], c_j = 1 + #{i < j not
discarded}, τ = 1/2, W₀ = α, with its own γ (:func:`_addis_gamma`: γ_1 = 5/8, so the first
level that counts is 2^-6 at α = 0.05). Why it holds: a null's p is ≤ α_j < 1/2 only if Δ̄ > 0, and a
null has Δ̄ ≥ 0 (so counts) with probability ≥ 1/2 = τ; so each null's chance of a false
accept is at most γ_{c}·α·P(it counts), and those γ_c, one per counted decision, sum to ≤ 1:
P(any false accept before the first true accept) ≤ α, as under ``basel``. (Nulls must be
independent of the past and *uniformly conservative* — a worse candidate's p is no more likely
to be small given that it counts than a null's — the paper's condition.) A Δ̄ of exactly 0
counts (the conservative side). ``benchmarks/loop_power.py`` measures it against ``lord`` and
``constant``: the loop default.

Pure: one function per question, so other spenders (a per-candidate look-spending grow, a
sequential gate's split) compose with :func:`alpha_for` rather than re-deriving it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

SCHEDULES = ("constant", "basel", "lord", "addis")  # the spec's gate_alpha_schedule choices
DISCARDING = ("addis",)  # the schedules whose decisions with Δ̄ < 0 spend nothing
ADDIS_TAU = Fraction(1, 2)  # addis discards a decision whose p exceeds τ (Δ̄ < 0)
# What hill-climb and the agent hand-off gate with when the spec names no schedule (the spec's
# own default stays ``constant``, for people who gate once). Chosen by benchmarks/loop_power.py
# (seed 2026; docs/explanation/alpha-across-a-run.md has the table): in loops of 100 decisions
# where most candidates are no better (45 % nulls, 45 % worse, 10 % +0.10), addis and lord both
# keep P(any false accept) ≤ α (≤ 0.03 over 400 loops at 100 × 5, where constant reaches 0.49),
# and addis accepts up to twice as many true improvements (4.41 vs 2.83 per loop at 100 × 5,
# 0.87 vs 0.51 at 50 × 5), because a clearly worse candidate costs it nothing. A run frozen
# under `lord` (before this default) keeps it (:mod:`.._policy.loop_schedule`).
LOOP_SCHEDULE = "addis"

# 6/π² as an exact-enough fraction: α_j is decided on rationals, like the exact gate's p-values.
# Rounded *down*, so Σ_j α_j stays ≤ α exactly.
_SIX_OVER_PI_SQ = Fraction(math.floor(6 / math.pi**2 * 10**12), 10**12)


def _gamma(i: int) -> Fraction:
    """LORD++'s spending sequence: γ_i = 6/(π² i²) (non-increasing, Σ_i γ_i ≤ 1), ``basel``'s:
    front-loaded, because a loop's first accept must come early for LORD to earn anything (the
    slowly decaying C·log(i)/(i·e^√(log i)) of Javanmard & Montanari, tried on 20 loops of
    benchmarks/loop_alpha.py, accepted fewer true improvements)."""
    return _SIX_OVER_PI_SQ / (i * i)


def alpha_for(
    schedule: str,
    alpha: float | Fraction,
    decision: int,
    accepts: Iterable[int] = (),
    discarded: Iterable[int] = (),
) -> Fraction:
    """The α the ``decision``-th gate decision on this run's val split gets (1-based).
    ``accepts``: the numbers of the earlier decisions that accepted (``lord`` and ``addis``
    earn α back on them; the other schedules ignore them). ``discarded``: the numbers of the
    earlier decisions with Δ̄ < 0 (``addis`` spends nothing on them)."""
    if decision < 1:
        raise ValueError(f"decisions are numbered from 1, got {decision}")
    base = alpha if isinstance(alpha, Fraction) else Fraction(str(alpha))
    if schedule == "constant":
        return base
    if schedule == "basel":
        return base * _SIX_OVER_PI_SQ / (decision * decision)
    if schedule == "lord":
        return _lord(base, decision, sorted(j for j in set(accepts) if 1 <= j < decision))
    if schedule == "addis":
        dropped = sorted(j for j in set(discarded) if 1 <= j < decision)

        def clock(j: int) -> int:  # j's place among the decisions that counted
            return j - sum(1 for i in dropped if i < j)

        earlier = sorted({clock(j) for j in set(accepts) if 1 <= j < decision and j not in dropped})
        return ADDIS_TAU * _lord(base, clock(decision), earlier, _addis_gamma)
    raise ValueError(f"unknown gate_alpha_schedule {schedule!r}; use one of {', '.join(SCHEDULES)}")


def _lord(
    base: Fraction, decision: int, earlier: list[int], gamma: Callable[[int], Fraction] = _gamma
) -> Fraction:
    """LORD++'s level at ``decision`` after accepts at ``earlier`` (sorted, each < decision)."""
    wealth0 = base  # W₀ = α: γ's levels until the first accept
    level = gamma(decision) * wealth0
    for k, tau in enumerate(earlier):
        level += (base - wealth0 if k == 0 else base) * gamma(decision - tau)
    return level


# addis's spending sequence: γ_1 = 5/8, then basel's scaled to the 3/8 left (non-increasing, Σ ≤ 1,
# as LORD++ needs). Why 5/8 and not basel's 0.608: the exact gate's p-values on a small val are
# powers of two ("k improved, none worse" is p = 2^-k), and at α = 0.05 the first level that
# counts is then α·τ·γ_1 = 2^-6 exactly, where basel's 0.0152 sat just below it: six tasks
# improved and none worse (issue 39's +0.30 edit, p = 0.0156) passes at the first decision that
# counts. It costs the later levels 4 % (γ_k × 0.957 from k = 2 on).
_ADDIS_FIRST = Fraction(5, 8)
_ADDIS_REST = (1 - _ADDIS_FIRST) / (1 - _SIX_OVER_PI_SQ)  # 6/π² rounded down: Σ stays ≤ 1


def _addis_gamma(i: int) -> Fraction:
    return _ADDIS_FIRST if i == 1 else _ADDIS_REST * _gamma(i)


def round_alpha(
    schedule: str,
    alpha: float | Fraction,
    decided: int,
    siblings: int,
    accepts: Sequence[int] = (),
    discarded: Sequence[int] = (),
) -> Fraction:
    """The family α of a round deciding ``siblings`` candidates after ``decided`` earlier
    decisions: α itself under ``constant`` (today's one family-wise α per round), else the sum
    of the slots the round uses, α_{decided+1} + … + α_{decided+siblings} (under ``lord`` and
    ``addis`` earned on the accepts before the round only, and under ``addis`` with none of the
    round's own decisions discarded: an accept or a discard inside it can only raise a level,
    so leaving them out keeps the promise)."""
    if schedule == "constant":
        return alpha_for(schedule, alpha, decided + 1)
    return sum(
        (alpha_for(schedule, alpha, decided + i, accepts, discarded) for i in range(1, max(siblings, 1) + 1)),
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
    a null: Σ α_j, capped at 1 (under ``lord`` the levels before a first accept; under
    ``addis``, whose levels rise as it discards, α·Σ_{c ≤ decisions} γ_c: see the module)."""
    if schedule in DISCARDING:
        spent = sum((_addis_gamma(c) for c in range(1, decisions + 1)), Fraction(0))
        return min(1.0, float(Fraction(str(alpha)) * spent))
    total = sum(float(alpha_for(schedule, alpha, j)) for j in range(1, decisions + 1))
    return min(1.0, total)


DECISION_EVENT = "gate_decision"  # one per candidate verdict a gate session writes on val


def decisions_so_far(events: list[dict[str, Any]]) -> int:
    """How many gate decisions on val the run has made (its ``gate_decision`` events)."""
    return sum(1 for e in events if e.get("kind") == DECISION_EVENT)


def accepted_decisions(events: list[dict[str, Any]]) -> list[int]:
    """The numbers j of the run's gate decisions on val that accepted (what ``lord`` earns on)."""
    return [
        int(e["j"])
        for e in events
        if e.get("kind") == DECISION_EVENT and e.get("decision") == "accept" and e.get("j") is not None
    ]


def discarded_decisions(events: list[dict[str, Any]]) -> list[int]:
    """The numbers j of the run's gate decisions on val that ``addis`` discarded (Δ̄ < 0: the
    event's ``discarded``, set by the gate session from the verdict's exact Δ̄)."""
    return [
        int(e["j"])
        for e in events
        if e.get("kind") == DECISION_EVENT and e.get("discarded") is True and e.get("j") is not None
    ]


def is_discarded(schedule: str, delta_exact: str | None, decision: str) -> bool:
    """Whether a decision spends nothing under ``schedule``: ``addis`` discards a reject whose
    Δ̄, as the exact fraction its verdict records, is below 0."""
    if schedule not in DISCARDING or decision == "accept" or not delta_exact:
        return False
    return Fraction(delta_exact) < 0


def slot_problems(events: list[dict[str, Any]], alpha: float | Fraction | None = None) -> list[str]:
    """One line per ``gate_decision`` that took a level another decision of the run had taken
    (what ``capevolve verify`` says of the budget): the j-th decision must be numbered j — two
    numbered alike were judged at once from the same budget — and, when the run's α is known,
    its α_j must be its schedule's level for j after the accepts before it."""
    problems: list[str] = []
    seen: dict[int, dict[str, Any]] = {}
    accepts: list[int] = []
    discarded: list[int] = []
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
                schedule = str(event["schedule"])
                due = float(alpha_for(schedule, alpha, j, accepts, discarded))
                # addis: a round's levels leave out its own discards (they can only raise a
                # level), so a logged level may sit below the one the whole log gives
                low = float(alpha_for(schedule, alpha, j, accepts)) if schedule in DISCARDING else due
                if not low <= float(event["alpha_j"]) <= due:
                    problems.append(
                        f"{where}: α_j = {event['alpha_j']}, but its schedule gives decision {j} "
                        f"α = {due:.6g}"
                    )
        if isinstance(j, int):
            seen.setdefault(j, event)
            if event.get("decision") == "accept":
                accepts.append(j)
            if event.get("discarded") is True:
                discarded.append(j)
    return problems
