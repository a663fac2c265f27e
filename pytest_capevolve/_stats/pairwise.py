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
    """The sign test over units: ``wins_b`` positive nets, ``wins_a`` negative, ``ties`` zero.
    ``p_greater``: the decision's one-sided p; ``ci``: Clopper–Pearson 95 % of B's win rate among decisive
    units."""

    wins_b: int
    wins_a: int
    ties: int
    p_greater: float
    p_less: float
    p_two_sided: float
    ci: tuple[float, float] | None

    @property
    def decisive(self) -> int:
        return self.wins_b + self.wins_a

    @property
    def win_rate(self) -> float | None:
        return self.wins_b / self.decisive if self.decisive else None


def net_preference(judgements: Iterable[str]) -> int:
    """B wins − A wins (ties count for neither); a value not in :data:`PREFERENCES` is refused."""
    net = 0
    for judgement in judgements:
        if judgement not in PREFERENCES:
            raise ValueError(f"preference {judgement!r} is not one of {', '.join(PREFERENCES)}")
        net += (judgement == "B") - (judgement == "A")
    return net


def sign_test(nets: Sequence[int]) -> SignTest:
    from scipy.stats import binomtest  # imported where used: a session that never judges pays nothing

    wins_b = sum(n > 0 for n in nets)
    wins_a = sum(n < 0 for n in nets)
    ties = len(nets) - wins_b - wins_a
    m = wins_b + wins_a
    if m == 0:
        return SignTest(0, 0, ties, 1.0, 1.0, 1.0, None)
    two = binomtest(wins_b, m, 0.5, alternative="two-sided")
    ci = two.proportion_ci(confidence_level=0.95)  # Clopper–Pearson, scipy's default
    return SignTest(
        wins_b,
        wins_a,
        ties,
        float(binomtest(wins_b, m, 0.5, alternative="greater").pvalue),
        float(binomtest(wins_b, m, 0.5, alternative="less").pvalue),
        float(two.pvalue),
        (float(ci.low), float(ci.high)),
    )


def p_greater_exact(wins_b: int, wins_a: int) -> Fraction:
    """The one-sided p of :func:`sign_test` as an exact fraction, P(Binomial(m, ½) ≥ wins_b)."""
    m = wins_b + wins_a
    return Fraction(sum(math.comb(m, k) for k in range(wins_b, m + 1)), 2**m)
