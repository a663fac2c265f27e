"""The resolution of the exact paired test: the smallest win it can accept at a level.

"k better, none worse" is the best k improved tasks can show (p = 2^-k, computed by the test itself, so the
two cannot drift); fewer improved tasks than the resolution cannot be accepted, however large the gains."""

from __future__ import annotations

from fractions import Fraction

from .sign_flip import sign_flip_on_integers


def best_p(improved: int, n_tasks: int) -> Fraction:
    if not 0 <= improved <= n_tasks:
        raise ValueError(f"improved must be within 0..{n_tasks}, got {improved}")
    result = sign_flip_on_integers([1] * improved + [0] * (n_tasks - improved))
    assert result is not None  # unit deltas: the exact count always fits
    return result.fraction


def smallest_win(level: Fraction, n_tasks: int) -> int | None:
    """The fewest tasks improved, none worse, the exact test accepts at ``level``; None if all would not."""
    for improved in range(1, n_tasks + 1):
        result = sign_flip_on_integers([1] * improved + [0] * (n_tasks - improved), float(level))
        if result is not None and result.at_most(level):
            return improved
    return None


# A spread of exactly 0 among null controls is not "an MDE of 0": a reproducible agent (same
# seed, same output) shows no noise to scale an effect by, so no MDE can be estimated from it.
NOT_ESTIMABLE = "MDE not estimable: the nulls are identical (reproducible agent)"
NOT_ESTIMABLE_NO_NULLS = "MDE not estimable: the best's trials are identical (reproducible agent)"
