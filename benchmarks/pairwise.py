"""False accepts and power of the pairwise sign test (``gate_mode: pairwise``).

Run: python benchmarks/pairwise.py [draws]   (default 4000 simulated comparisons per row)

Each null row is a random judge between two outputs that are the same thing: it picks the
output shown first with probability `first`, the second with `second`, and ties otherwise; the
order is drawn at random per judgement (`random`), balanced per task (`balanced`: A first on
even trials), or A always first (`fixed`: one order only, which the gate never does: it judges
both).
Power rows give B a true edge: a judgement that would have gone to A goes to B with
probability 0.3. Columns: the rate, its ratio to α, and `!` where a null rate exceeds α by
more than 3 binomial standard errors. The test is the package's own
(:func:`pytest_capevolve._stats.pairwise.sign_test`); tests/calibration/test_pairwise_null.py
checks the same cells against an exact reference.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from pytest_capevolve._stats.pairwise import sign_test

ALPHA = 0.05
JUDGES = [("fair", 0.4, 0.4), ("leans first", 0.6, 0.2), ("many ties", 0.15, 0.1), ("leans second", 0.1, 0.6)]
CELLS = [(8, 1, "random"), (8, 2, "balanced"), (20, 2, "balanced"), (30, 3, "random"), (60, 1, "random")]


@functools.cache
def p_greater(wins_b: int, wins_a: int) -> float:
    return sign_test([1] * wins_b + [-1] * wins_a + [0]).p_greater


def nets(rng, draws, tasks, trials, order, first, second, edge=0.0):
    u = rng.random((draws, tasks, trials))
    if order == "random":
        a_first = rng.random(u.shape) < 0.5
    else:
        a_first = np.broadcast_to((np.arange(trials) % 2 == 0) | (order == "fixed"), u.shape)
    picks_first, picks_second = u < first, (u >= first) & (u < first + second)
    b = (picks_first & ~a_first) | (picks_second & a_first)
    a = (picks_first & a_first) | (picks_second & ~a_first)
    moved = a & (rng.random(u.shape) < edge)
    return (b | moved).sum(-1).astype(int) - (a & ~moved).sum(-1).astype(int)


def rate(unit_nets: np.ndarray) -> float:
    wins = zip((unit_nets > 0).sum(1), (unit_nets < 0).sum(1), strict=True)
    return float(np.mean([p_greater(int(b), int(a)) <= ALPHA for b, a in wins]))


def main(draws: int) -> None:
    slack = 3 * (ALPHA * (1 - ALPHA) / draws) ** 0.5
    print(f"{draws} comparisons per row, α = {ALPHA}; `!`: a null rate above α by more than 3 SE")
    print(
        f"{'tasks×trials':>12} {'order':>9} {'judge':>13} {'null rate':>9} {'/α':>5}  {'power (edge 0.3)':>16}"
    )
    rows = [(cell, judge) for cell in CELLS for judge in JUDGES] + [((20, 1, "fixed"), JUDGES[3])]
    for seed, ((tasks, trials, order), (name, first, second)) in enumerate(rows):
        rng = np.random.default_rng(seed)
        null = rate(nets(rng, draws, tasks, trials, order, first, second))
        power = rate(nets(rng, draws, tasks, trials, order, first, second, edge=0.3))
        mark = "!" if null > ALPHA + slack else " "
        print(
            f"{tasks:>7}×{trials:<4} {order:>9} {name:>13} {null:>9.4f} {null / ALPHA:>5.2f}{mark} {power:>16.3f}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4000)
