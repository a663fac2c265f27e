"""Task-granular group-sequential designs for ``cost_per_decision.py`` (issue 40): all trials of the
next block of val tasks, a look, the next block only while undecided — the exact sign-flip test at
each early look, a binding futility stop, and the last look by a joint sign-flip p that replays every
look (``trials_first.joint_last_p`` on task-prefix looks), so the design is one test at α.

Run: python benchmarks/task_looks.py [--draws 200] [--seed 7]

τ² rates, +0.10, 200 draws, seed 7 (the fixed gate's N80 at 71.7 tasks there): every design of the
grid below spends 0.74–0.87× the fixed gate's rollouts at 80 % power, type I 0.026–0.041 — no better
than trials first, and far from the SPRT rows; a futility bar that stops early enough to save
rollouts stops +0.10 candidates too (power 0.72–0.80 on the fixed gate's val).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trials_first import RESAMPLES, Paired, null_tail  # noqa: E402

from pytest_capevolve._stats.sign_flip import sign_flips  # noqa: E402

ALPHA = Fraction(1, 20)


def task_looks(
    looks: int, early: Sequence[Fraction], futility: Sequence[float]
) -> Callable[[Paired], tuple[np.ndarray, np.ndarray]]:
    """``looks`` equally spaced looks over the N val tasks (all trials of a task paid together): at
    early look k, accept if the exact one-sided sign-flip p of the tasks so far is ≤ ``early[k]``,
    reject (binding futility) if their mean delta per task is ≤ ``futility[k]``; at the last look,
    accept if :func:`trials_first.joint_last_p` (task-level sign flips replaying every look) ≤ α.
    Valid while Σ early < α (the early accepts are part of the joint p's tail)."""
    assert sum(early) < ALPHA and len(early) == len(futility) == looks - 1

    def path(a: Paired) -> tuple[np.ndarray, np.ndarray]:
        draws, n, trials = a.cand.shape
        ends = [max(1, round(n * (k + 1) / looks)) for k in range(looks)]
        accepted, paid = np.zeros(draws, dtype=bool), np.zeros(draws)
        deltas = np.rint((a.cand - a.best).sum(axis=2)).astype(np.int64)
        bars = [int(np.floor(futility[k] * trials * ends[k])) for k in range(looks - 1)]
        for i in range(draws):
            d = deltas[i]
            sums = np.stack([np.where(np.arange(n) < e, d, 0) for e in ends], axis=1)
            for k in range(looks - 1):
                paid[i] = ends[k] * trials
                x = sums[:, k]
                span = int(np.abs(x).sum())
                if null_tail(np.abs(x))[int(x.sum()) + span] <= float(early[k]):
                    accepted[i] = True
                    break
                if x.sum() <= bars[k]:
                    break
            else:
                paid[i] = n * trials
                levels = [*early, ALPHA]
                accepted[i] = _joint(sums, levels, bars, i) <= ALPHA
        return accepted, paid

    return path


def _joint(sums: np.ndarray, levels: list[Fraction], bars: Sequence[int], seed: int) -> Fraction:
    """:func:`trials_first.joint_last_p` with the futility stop at sum ≤ ``bars[k]`` at early look k
    (``joint_last_p`` stops at 0): T = ∞ where a flip's early look accepts, −∞ where its futility
    stops it first, else its last sum; p = share of flips with T ≥ the observed (+1, seeded)."""
    looks = sums.shape[1]
    tails = [null_tail(np.abs(sums[:, k])) for k in range(looks - 1)]
    spans = [int(np.abs(sums[:, k]).sum()) for k in range(looks - 1)]
    observed = int(sums[:, -1].sum())
    count = 0
    for signs in sign_flips(sums.shape[0], RESAMPLES, seed):
        flipped = signs.astype(np.int64) @ sums
        alive, accepted = np.ones(len(signs), dtype=bool), np.zeros(len(signs), dtype=bool)
        for k in range(looks - 1):
            hit = alive & (tails[k][flipped[:, k] + spans[k]] <= float(levels[k]))
            accepted |= hit
            alive &= ~hit & (flipped[:, k] > bars[k])
        count += int(np.sum(accepted | (alive & (flipped[:, -1] >= observed))))
    return Fraction(count + 1, RESAMPLES + 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    import cost_per_decision as bench  # noqa: PLC0415

    rng = np.random.default_rng(args.seed)
    pool, trials = bench.real_rates(), 3
    pops = {e: bench.population(rng, pool, e, args.draws, trials) for e in (0.0, 0.10)}
    start = time.perf_counter()
    base_at = bench.n80(bench.fixed_exact, pops[0.10])
    base = bench.mean_at(bench.fixed_exact, pops[0.10], base_at)
    print(f"fixed exact: N80 {base[0]:.1f}")
    for name, design in DESIGNS.items():
        n, ratio, power, t1, null_ratio = bench.design_row(design, pops, 0.10, base[2], base_at)
        print(
            f"{name:<24} N80 {n:>6.1f}  ×fixed {ratio:.3f}  power* {power:.3f}  "
            f"type I {t1:.3f}  null ×fixed {null_ratio:.2f}",
            flush=True,
        )
    print(f"({time.perf_counter() - start:.0f} s)")


NO = -1e9  # no futility stop at that look


def _grid() -> dict[str, Callable[[Paired], tuple[np.ndarray, np.ndarray]]]:
    """K looks, an early-accept budget split equally over the early looks, futility bars rising
    linearly from the first early look to the last (mean delta per trial)."""
    designs = {}
    for looks in (4, 6):
        for budget in (Fraction(2, 100), Fraction(35, 1000)):
            for first, last in ((-0.05, 0.03), (0.0, 0.05), (-0.02, 0.06)):
                early = [budget / (looks - 1)] * (looks - 1)
                bars = [first + (last - first) * k / (looks - 2) for k in range(looks - 1)]
                designs[f"K{looks} e{float(budget):.3f} f{first:+.2f}..{last:+.2f}"] = task_looks(
                    looks, early, bars
                )
    return designs


DESIGNS = _grid()

if __name__ == "__main__":
    main()
