"""The exact sign test on pairwise preferences: a judge shown two outputs says which is better (``A``,
``B`` or ``tie``), and the question is whether B is preferred more often than A.

Under "no difference", with the order shown random or balanced, a unit's net preference (B wins − A wins)
is as likely positive as negative whatever the judge's lean, so among the m units with a non-zero net the
positive count is Binomial(m, ½). Units netting zero are ``ties``, not tested. Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

PREFERENCES = ("A", "B", "tie")


@dataclass(frozen=True)
class SignTest:
    """The sign test over units: ``wins_b`` positive nets, ``wins_a`` negative, ``ties`` zero;
    ``p_greater``: the decision's one-sided p (:func:`p_greater_exact`, as a float)."""

    wins_b: int
    wins_a: int
    ties: int
    p_greater: float


def net_preference(judgements: Iterable[str]) -> int:
    """B wins − A wins (ties count for neither); a value not in :data:`PREFERENCES` is refused."""
    net = 0
    for judgement in judgements:
        if judgement not in PREFERENCES:
            raise ValueError(f"preference {judgement!r} is not one of {', '.join(PREFERENCES)}")
        net += (judgement == "B") - (judgement == "A")
    return net


def sign_test(nets: Sequence[int]) -> SignTest:
    wins_b = sum(n > 0 for n in nets)
    wins_a = sum(n < 0 for n in nets)
    return SignTest(wins_b, wins_a, len(nets) - wins_b - wins_a, float(p_greater_exact(wins_b, wins_a)))


def p_greater_exact(wins_b: int, wins_a: int) -> Fraction:
    """The one-sided p of :func:`sign_test` as an exact fraction, P(Binomial(m, ½) ≥ wins_b)."""
    m = wins_b + wins_a
    return Fraction(sum(math.comb(m, k) for k in range(wins_b, m + 1)), 2**m)
