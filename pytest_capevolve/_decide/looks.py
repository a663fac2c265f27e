"""Looks: how one decision's α is spent across the gate and its grows.

Looking again after a near miss inflates false accepts, so α is split before the first look: α/2 for the
gate, (α/2) / (L − 1) for each grow; by the union bound the whole "gate, grow and gate again" accepts a
byte-identical candidate with probability ≤ α (``docs/explanation/alpha-across-looks.md``). A verdict
indecisive by coverage that showed its numbers is a look too (:func:`counted_look_factor`). Pure."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .basis import Basis

MAX_LOOKS = 3  # the gate and at most two grows


def as_fraction(alpha: float | Fraction) -> Fraction:
    return alpha if isinstance(alpha, Fraction) else Fraction(str(alpha))


def look_schedule(alpha: float | Fraction, max_looks: int) -> list[Fraction]:
    if not 1 <= max_looks <= MAX_LOOKS:
        raise ValueError(f"max_looks must be 1 to {MAX_LOOKS}, got {max_looks}")
    total = as_fraction(alpha)
    if max_looks == 1:
        return [total]
    first = total / 2
    later = (total - first) / (max_looks - 1)
    return [first] + [later] * (max_looks - 1)


def look_alpha(alpha: float | Fraction, look: int, max_looks: int) -> Fraction:
    schedule = look_schedule(alpha, max_looks)
    if not 1 <= look <= len(schedule):
        raise ValueError(f"look {look} is outside 1..{len(schedule)}")
    return schedule[look - 1]


def looks_record(alpha: float | Fraction, look: int, max_looks: int) -> dict[str, Any]:
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
    """The decision a verdict stands for, as ``--capevolve-commit auto`` books it: a reject with Δ̄ > 0
    under the bar, growth allowed, is ``provisional`` while looks remain and ``inconclusive`` at the last.
    ``looks``: the verdict's ``details["looks"]``."""
    looks = looks if isinstance(looks, dict) else {}
    max_looks = int(looks.get("max_looks") or 1)
    provisional = decision == "reject" and basis in (Basis.EXACT, Basis.NULL_FLOOR) and (delta_mean or 0) > 0
    if not provisional or max_looks <= 1:
        return decision
    return "provisional" if int(looks.get("look") or 1) < max_looks else "inconclusive"


def counted_look_factor(max_looks: int) -> Fraction:
    """How much smaller than look 1 a tag's gate is taken when its first look was spent on an indecisive
    verdict: ``1/2`` when the spec allows no growth (α/2 + α/2 = α), else ``1/(L − 1)``."""
    return look_alpha(Fraction(1), 2, max(2, max_looks)) / look_alpha(Fraction(1), 1, max_looks)
