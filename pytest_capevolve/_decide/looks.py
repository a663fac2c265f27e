"""Looks: how one decision's α is spent across the gate and its grows.

A candidate whose verdict is provisional (Δ̄ > 0 under the bar) may be grown — more trials on
it and on the best, then gated again at the pooled n. Looking again after a near miss inflates
false accepts, so the decision's α is split across its looks before the first one is taken:

    look 1 (the gate):            α/2
    looks 2..L (each grow):       (α/2) / (L − 1)

The levels sum to α, and each look's exact test is valid at its own level on its own (pooled)
data whatever happened at the looks before, so by the union bound the policy "gate; if
provisional, grow and gate again, at most L − 1 times" accepts a byte-identical candidate with
probability at most α (``benchmarks/grow_calibration.py`` measures it). When the spec allows
no growth (``grow_max_looks: 1``, the default) the one look gets all of α, as before.

A verdict that decided nothing yet showed the data — indecisive by coverage, with its Δ̄ and
per-task numbers — is a look too: the optimizer saw them and chose to pay the missing rollouts
and gate again (issue 37). The first such verdict of a tag against a parent counts as look 1,
and the tag's next gate is look 2 (:func:`counted_look_factor`).

The α handed in is whatever the decision gets (the spec's ``gate_alpha``, or a share of it
from a schedule across decisions); this module only splits it across looks. Pure.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .basis import Basis

MAX_LOOKS = 3  # the gate and at most two grows


def as_fraction(alpha: float | Fraction) -> Fraction:
    """α exactly, read from its decimal text (0.05 → 1/20), so no level hinges on rounding."""
    return alpha if isinstance(alpha, Fraction) else Fraction(str(alpha))


def look_schedule(alpha: float | Fraction, max_looks: int) -> list[Fraction]:
    """The level of each look, in order; they sum to ``alpha`` exactly."""
    if not 1 <= max_looks <= MAX_LOOKS:
        raise ValueError(f"max_looks must be 1 to {MAX_LOOKS}, got {max_looks}")
    total = as_fraction(alpha)
    if max_looks == 1:
        return [total]
    first = total / 2
    later = (total - first) / (max_looks - 1)
    return [first] + [later] * (max_looks - 1)


def look_alpha(alpha: float | Fraction, look: int, max_looks: int) -> Fraction:
    """The level look number ``look`` (1 = the first gate) is decided at."""
    schedule = look_schedule(alpha, max_looks)
    if not 1 <= look <= len(schedule):
        raise ValueError(f"look {look} is outside 1..{len(schedule)}")
    return schedule[look - 1]


def looks_record(alpha: float | Fraction, look: int, max_looks: int) -> dict[str, Any]:
    """What a verdict records about its look: which one, the decision's α, the schedule."""
    schedule = look_schedule(alpha, max_looks)
    return {
        "look": look,
        "max_looks": max_looks,
        "decision_alpha": str(as_fraction(alpha)),
        "level": float(schedule[look - 1]),
        "level_exact": str(schedule[look - 1]),
        "schedule": [str(level) for level in schedule],
    }


def shown_decision(decision: str, basis: str | None, delta_mean: float | None, looks: Any) -> str:
    """The decision a verdict stands for, as ``--capevolve-commit auto`` books it: a gate
    reject with Δ̄ > 0 under the bar, decided with growth allowed, is ``provisional`` while
    looks remain (grow it) and ``inconclusive`` at its last look — never a plain reject.
    ``looks``: the verdict's ``details["looks"]`` (absent or one look allowed: the decision)."""
    looks = looks if isinstance(looks, dict) else {}
    max_looks = int(looks.get("max_looks") or 1)
    if decision != "reject" or basis not in (Basis.EXACT, Basis.NULL_FLOOR) or not (delta_mean or 0) > 0:
        return decision
    if max_looks <= 1:
        return decision
    return "provisional" if int(looks.get("look") or 1) < max_looks else "inconclusive"


def counted_look_factor(max_looks: int) -> Fraction:
    """How much smaller than its first look's level a tag's gate is taken at when its first
    look was spent on a verdict that decided nothing (indecisive by coverage, its numbers
    shown): look 2 of at least two looks, relative to look 1 of ``max_looks``. ``1/2`` when the
    spec allows no growth (α/2 + α/2 = α); ``1/(L − 1)`` otherwise."""
    return look_alpha(Fraction(1), 2, max(2, max_looks)) / look_alpha(Fraction(1), 1, max_looks)
