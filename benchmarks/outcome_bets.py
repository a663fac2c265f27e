"""A sequential gate on each task's whole paired outcome, for ``cost_per_decision.py`` (issue 40):
an e-process whose bets are fixed in advance from a *design* alternative, not learned, and which
reads the candidate's and the best's successes (a, b) rather than only their delta.

Run: python benchmarks/outcome_bets.py [--draws 300] [--seed 2026] [--mix]
     [--type-one 20000 | --precise 8000 --seed 2027]

Task t multiplies the wealth by 1 + θ(a_t, b_t), θ(a, b) = (p(a, b) − p(b, a)) / (p(a, b) + p(b, a))
for a design law p (:func:`sprt_floor.outcome_law` on a design pool of rates, at a design effect):
when the arms are exchangeable within a task (a byte-identical candidate, common seeds or not),
given the unordered pair {a, b} each order is equally likely, so every factor has mean 1 and the
wealth is a non-negative martingale whatever the rates — by Ville's inequality it reaches 1/α with
probability ≤ α. Any design law keeps that; a design near the truth spends less. Accept when the
wealth reaches 1/α; reject (binding futility) when it falls to ``floor``; at the end of val, the
joint swap p (task-level swaps of (a, b), each replaying the whole path: T = ∞ on a crossing, −∞
on futility, else the final log-wealth; +1, seeded) ≤ α — as the sequential gate's
``exhaustion_p`` calibrates its end, so early and final accepts are one test at α.

The design pool is the synthetic mix (``cost_per_decision.synthetic_rates``, seed 2026), the
design effect +0.10 and the lift spread over headroom (the benchmark's own lift model: a design
this close to the truth's form is optimistic; the pool is not the τ² one).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sprt_floor import exchangeable, outcome_law  # noqa: E402
from trials_first import Paired  # noqa: E402

ALPHA = 0.05
RESAMPLES = 1000


def design_steps(pool: np.ndarray, effect: float, trials: int) -> np.ndarray:
    """log(1 + θ(a, b)) for every (a, b): the log-factor a task's outcome multiplies the wealth by."""
    law = outcome_law(pool, effect, trials)
    return np.asarray(np.log(law) - np.log(exchangeable(law)))


def _stops(paths: np.ndarray, low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """(code, tasks used) of log-wealth paths (rows): 1 crossed ``high`` first, −1 ``low``, 0 neither."""
    n = paths.shape[1]
    up, down = paths >= high, paths <= low
    t_up = np.where(up.any(axis=1), up.argmax(axis=1), n)
    t_down = np.where(down.any(axis=1), down.argmax(axis=1), n)
    code = np.where(t_up < t_down, 1, np.where(t_down < t_up, -1, 0))
    return code, np.minimum(np.minimum(t_up, t_down) + 1, n)


def log_wealth(steps: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Log-wealth paths along the last axis of ``a``/``b``: one design's (``steps`` 2-D), or the mean
    wealth of several designs' (``steps`` stacked, J × 4 × 4), itself a fair bet's wealth."""
    if steps.ndim == 2:
        return np.cumsum(steps[a, b], axis=-1)
    paths = np.stack([np.cumsum(s[a, b], axis=-1) for s in steps])
    return np.asarray(np.logaddexp.reduce(paths, axis=0) - np.log(len(steps)))


def swap_p(steps: np.ndarray, a: np.ndarray, b: np.ndarray, low: float, seed: int) -> float:
    """The joint p of a path that reached the end of val: share of task-level swaps of (a, b) whose
    path crosses ln(1/α) first, or reaches the end at a log-wealth ≥ the observed (+1)."""
    high = np.log(1 / ALPHA)
    observed = float(log_wealth(steps, a, b)[-1])
    rng = np.random.default_rng(seed)
    flips = rng.random((RESAMPLES, a.size)) < 0.5
    paths = log_wealth(steps, np.where(flips, b, a), np.where(flips, a, b))
    code, _ = _stops(paths, low, high)
    count = int(np.sum((code == 1) | ((code == 0) & (paths[:, -1] >= observed - 1e-9))))
    return (count + 1) / (RESAMPLES + 1)


def outcome_bets(steps: np.ndarray, low: float) -> Callable[[Paired], tuple[np.ndarray, np.ndarray]]:
    """The design above with log-steps ``steps`` and futility at log-wealth ``low``."""
    high = np.log(1 / ALPHA)

    def path(arms: Paired) -> tuple[np.ndarray, np.ndarray]:
        a = np.rint(arms.cand.sum(axis=2)).astype(int)
        b = np.rint(arms.best.sum(axis=2)).astype(int)
        code, used = _stops(log_wealth(steps, a, b), low, high)
        accepted = code == 1
        for i in np.flatnonzero(code == 0):
            accepted[i] = swap_p(steps, a[i], b[i], low, int(i)) <= ALPHA
        return accepted, used * arms.cand.shape[2]

    return path


def precise_n80(
    path: Callable[[Paired], tuple[np.ndarray, np.ndarray]], arms: Paired, power: float = 0.8
) -> tuple[float, float, float]:
    """(N80, its standard error, mean rollouts there) of ``path`` at integer val sizes on ``arms``
    (a prefix of the same candidates per N), interpolated between the N either side of 80 %; the SE
    is the power's binomial SE over the local slope. Power is taken to grow with N (give or take)."""
    seen: dict[int, tuple[float, float]] = {}

    class Prefix:
        def __init__(self, n: int) -> None:
            self.cand, self.best = arms.cand[:, :n], arms.best[:, :n]

    def at(n: int) -> tuple[float, float]:
        if n not in seen:
            accepted, paid = path(Prefix(n))
            seen[n] = float(accepted.mean()), float(paid.mean())
        return seen[n]

    lo, hi = 1, arms.cand.shape[1]
    assert at(hi)[0] >= power, "val too small for 80 % power"
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if at(mid)[0] >= power else (mid + 1, hi)
    (p0, c0), (p1, c1) = at(lo - 1), at(lo)
    share = (power - p0) / (p1 - p0)
    left, right = max(lo - 3, 1), min(lo + 2, arms.cand.shape[1])
    slope = max(p1 - p0, (at(right)[0] - at(left)[0]) / (right - left), 1e-6)
    se = float(np.sqrt(power * (1 - power) / len(arms.cand)) / slope)
    return lo - 1 + share, se, c0 + share * (c1 - c0)


def design(mix: bool) -> np.ndarray:
    """The design's log-steps: bets for +0.10 on the synthetic mix (seed 2026), or with ``mix`` the
    mean wealth of the +0.05 and +0.10 designs (stacked)."""
    import cost_per_decision as bench  # noqa: PLC0415  (a sibling that imports this one)

    pool = bench.synthetic_rates(np.random.default_rng(2026))
    if mix:
        return np.stack([design_steps(pool, 0.05, 3), design_steps(pool, 0.10, 3)])
    return design_steps(pool, 0.10, 3)


def precise(steps: np.ndarray, effect: float, draws: int, seed: int, lows: tuple[float, ...]) -> None:
    """On the τ² rates: the fixed exact gate's and the design's N80 and rollouts at integer N on
    ``draws`` candidates (the same ones for both), ±2 SE."""
    import cost_per_decision as bench  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    arms = bench.population(rng, bench.real_rates(), effect, draws, 3)
    top = 160 if effect >= 0.1 else 520
    arms = bench.Arms(arms.cand[:, :top], arms.best[:, :top], arms.cand, arms.best)
    n80, se, paid = precise_n80(bench.fixed_exact, arms)
    print(f"  fixed exact: N80 {n80:.1f} ± {2 * se:.1f} (2 SE), {draws:,} candidates per N", flush=True)
    for low in lows:
        try:
            n, n_se, cost = precise_n80(outcome_bets(steps, low), arms)
        except AssertionError:
            print(f"  (a, b) bets, futility at {low:+.1f}: below 80 % power at {top} tasks", flush=True)
            continue
        ratio = cost / paid
        err = 2 * ratio * float(np.hypot(n_se / n, se / n80))
        print(
            f"  (a, b) bets, futility at {low:+.1f}: N80 {n:.1f}, ×fixed {ratio:.3f} ± {err:.3f}", flush=True
        )


def type_one(steps: np.ndarray, draws: int, low: float) -> None:
    """False-accept rate on ``draws`` byte-identical candidates per val size, τ² rates, with a
    one-sided 95 % Clopper–Pearson bound."""
    import cost_per_decision as bench  # noqa: PLC0415

    for n in (30, 55, 66):
        rng = np.random.default_rng(n)
        rates = rng.choice(bench.real_rates(), size=(draws, n), replace=True)
        cand, best = ((rng.random((draws, n, 3)) < rates[..., None]).astype(float) for _ in range(2))
        rate = float(outcome_bets(steps, low)(bench.Arms(cand, best, cand, best))[0].mean())
        upper = sps.beta.ppf(0.95, rate * draws + 1, draws - rate * draws)
        print(
            f"  type I at N = {n}, {draws:,} τ² nulls: {rate:.4f} (95 % upper bound {upper:.4f})", flush=True
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--mix", action="store_true", help="the mean wealth of the +0.05 and +0.10 designs")
    parser.add_argument("--type-one", type=int, default=0, metavar="DRAWS", help="only: type I on τ² nulls")
    parser.add_argument(
        "--precise", type=int, default=0, metavar="DRAWS", help="only: N80 at integer N, τ², +0.10 and +0.05"
    )
    args = parser.parse_args(argv)
    import cost_per_decision as bench  # noqa: PLC0415  (a sibling that imports this one)

    start = time.perf_counter()
    print("python benchmarks/outcome_bets.py " + " ".join(sys.argv[1:] if argv is None else argv))
    steps = design(args.mix)
    if args.type_one:
        type_one(steps, args.type_one, LOWS[1])
    if args.precise:
        for effect in (0.10, 0.05):
            print(f"τ² {effect:+.2f}:")
            precise(steps, effect, args.precise, args.seed, (LOWS[1],))
    if args.type_one or args.precise:
        print(f"({time.perf_counter() - start:.0f} s)")
        return
    rng = np.random.default_rng(args.seed)
    for name, pool in (("τ²", bench.real_rates()), ("synthetic", bench.synthetic_rates(rng))):
        for effect in (0.05, 0.10):
            pops = {e: bench.population(rng, pool, e, args.draws, 3) for e in (0.0, effect)}
            base_at = bench.n80(bench.fixed_exact, pops[effect])
            base = bench.mean_at(bench.fixed_exact, pops[effect], base_at)
            print(f"{name} {effect:+.2f}: fixed exact N80 {base[0]:.1f}", flush=True)
            for low in LOWS:
                n, ratio, power, rate, null_ratio = bench.design_row(
                    outcome_bets(steps, low), pops, effect, base[2], base_at
                )
                print(
                    f"  (a, b) bets, futility at {low:+.1f}: N80 {n:6.1f} ×fixed {ratio:.3f} "
                    f"power* {power:.3f} type I {rate:.3f} null ×fixed {null_ratio:.2f}",
                    flush=True,
                )
    print(f"({time.perf_counter() - start:.0f} s)")


LOWS = (-2.0, -2.5, -4.0)

if __name__ == "__main__":
    main()
