"""Which α schedule a loop should gate with: constant, basel or lord, on a simulated loop.

Run: python benchmarks/loop_alpha.py [loops] [seed]   (defaults 300, 2026)

One simulated loop is 100 gate decisions in a row on one val split of N = 60 tasks, 5 trials
per arm, per-task success rates resampled from the public tau2-bench airline run (tests/data:
the seed arm and its three byte-identical null arms). Each candidate is, with probability 0.10,
truly +0.10 better than the current best (its rates lifted over the headroom, as in
benchmarks/sequential.py) and otherwise a null (the best's own rates). Each is gated against the
current best's rollouts (reused, as a run reuses them) with the exact sign-flip test at the α
its schedule gives the decision; an accept makes it the best (its rollouts the new reference,
its rates the new truth). The same random draws drive every schedule up to their first
different decision.

Per schedule, means over the loops (± their Monte Carlo SE): false accepts (nulls accepted),
true accepts, P(any false accept), the final best's true gain over the seed (the mean
per-task rate it really has, minus the seed's), and how much the gain the loop claims (the val
Δ̄ of its accepts, summed) overstates it. ``constant`` is the one-shot α at every
decision; ``basel`` spends α as α·6/(π² j²); ``lord`` (LORD++) earns α back on each accept.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sequential import lifted, real_rates  # noqa: E402

from pytest_capevolve import _stats as stats  # noqa: E402
from pytest_capevolve._decide import alpha_budget  # noqa: E402

ALPHA, N, TRIALS, DECISIONS, SHARE_GOOD, EFFECT = 0.05, 60, 5, 100, 0.10, 0.10


def one_loop(seed: int, schedule: str, pool: np.ndarray) -> dict[str, float]:
    rng = np.random.default_rng(seed)  # the same seed per loop for every schedule
    start = rng.choice(pool, size=N)
    truth = start.copy()
    best = (rng.random((N, TRIALS)) < truth[:, None]).astype(float)
    accepts: list[int] = []
    false = true = 0
    claimed = 0.0  # the val Δ̄ of every accept, summed: the gain the loop reports
    for j in range(1, DECISIONS + 1):
        good = rng.random() < SHARE_GOOD
        rates = lifted(truth, EFFECT) if good else truth
        cand = (rng.random((N, TRIALS)) < rates[:, None]).astype(float)
        level = alpha_budget.alpha_for(schedule, ALPHA, j, accepts)
        if stats.sign_flip_test(cand, best, alpha=float(level)).at_most(level):
            accepts.append(j)
            claimed += float(np.mean(cand) - np.mean(best))
            true += good
            false += not good
            truth, best = rates, cand
    return {
        "false": false,
        "true": true,
        "any_false": float(false > 0),
        "gain": float(truth.mean() - start.mean()),
        "optimism": claimed - float(truth.mean() - start.mean()),
    }


def main() -> None:
    loops = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 2026
    pool = real_rates()
    print(
        f"seed {seed}; {loops} simulated loops × {DECISIONS} decisions; N = {N} val tasks, {TRIALS} "
        f"trials; {SHARE_GOOD:.0%} of candidates truly {EFFECT:+.2f}, the rest null; α = {ALPHA}"
    )
    print(
        f"{'schedule':>9} {'false accepts':>15} {'true accepts':>15} {'P(any false)':>15} "
        f"{'final true gain':>17}  {'vs constant':>11} {'claimed − true':>16}"
    )
    started = time.perf_counter()
    baseline = None
    for schedule in ("constant", "basel", "lord"):  # addis discards on Δ̄: benchmarks/loop_power.py
        rows = [one_loop(seed + i, schedule, pool) for i in range(loops)]
        cells = {}
        for key in ("false", "true", "any_false", "gain", "optimism"):
            values = np.array([r[key] for r in rows], dtype=float)
            cells[key] = (values.mean(), values.std(ddof=1) / np.sqrt(loops))
        baseline = baseline or cells["gain"][0]
        shown = " ".join(f"{cells[k][0]:>7.3f} ± {cells[k][1]:<5.3f}" for k in ("false", "true", "any_false"))
        print(
            f"{schedule:>9} {shown} {cells['gain'][0]:>+8.4f} ± {cells['gain'][1]:<6.4f} "
            f"{cells['gain'][0] / baseline:>10.2f}× {cells['optimism'][0]:>+8.4f} ± {cells['optimism'][1]:<6.4f}"
        )
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
