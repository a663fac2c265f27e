"""False-accept rate (and power) of compare's exact test when tasks come in clusters.

Run: python benchmarks/compare_clusters.py [draws]   (default 2000 simulated comparisons per row)

Each null comparison is two independent runs of one agent on G clusters of m tasks, 2 trials
each; in each run every cluster goes well or badly as a whole (pass rate `hi` or `lo`, a coin
flip per cluster and run): the dependence a shared source gives. Power rows give the candidate
a +0.15 lift on every pass rate. Columns: the test flipping whole clusters (`--clusters`), and
the plain test flipping tasks one by one, which takes the tasks of a cluster as independent.
A rate above α = 0.05 by more than 3 binomial standard errors is marked `!`.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_capevolve._stats.arms import sign_flip_test
from pytest_capevolve._stats.clusters import cluster_sign_flip_test

ALPHA = 0.05
CELLS = [(6, 5), (10, 3), (16, 4), (30, 2), (30, 1)]
SPLITS = [(0.9, 0.1), (0.7, 0.3)]


def run(rng: np.random.Generator, groups: int, size: int, hi: float, lo: float, lift: float) -> np.ndarray:
    rates = np.where(rng.random(groups) < 0.5, hi, lo) + lift
    return (rng.random((groups * size, 2)) < np.repeat(np.clip(rates, 0, 1), size)[:, None]).astype(float)


def rates(
    groups: int, size: int, hi: float, lo: float, lift: float, draws: int, seed: int
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    clusters = [f"c{i}" for i in range(groups) for _ in range(size)]
    by_cluster = by_task = 0
    for _ in range(draws):
        cand, best = run(rng, groups, size, hi, lo, lift), run(rng, groups, size, hi, lo, 0.0)
        by_cluster += cluster_sign_flip_test(cand, best, clusters, alpha=ALPHA).at_most(ALPHA)
        by_task += sign_flip_test(cand, best, alpha=ALPHA).at_most(ALPHA)
    return by_cluster / draws, by_task / draws


def main(draws: int) -> None:
    slack = 3 * (ALPHA * (1 - ALPHA) / draws) ** 0.5
    print(f"{draws} comparisons per row, α = {ALPHA}; `!`: above α by more than 3 SE ({slack:.3f})")
    print(f"{'cell':>10}  {'hi/lo':>8}  {'kind':>5}  {'flip clusters':>13}  {'flip tasks':>10}")
    for seed, (groups, size) in enumerate(CELLS):
        for hi, lo in SPLITS:
            for kind, lift in (("null", 0.0), ("+0.15", 0.15)):
                c, t = rates(groups, size, hi, lo, lift, draws, seed * 100 + int(hi * 10))

                def shown(rate: float, null: bool = kind == "null") -> str:
                    return f"{rate:.3f}" + ("!" if null and rate > ALPHA + slack else " ")

                print(
                    f"{groups:>4} × {size:<3}  {hi:.1f}/{lo:.1f}  {kind:>5}  {shown(c):>13}  {shown(t):>10}"
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
