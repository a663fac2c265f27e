"""Issue 40's trade, measured: sequential bets on each task's (a, b) that spend ≤ 0.6× the fixed
gate's rollouts at +0.10 *and* keep its power at +0.05 — or the frontier between the two.

Run: python benchmarks/bet_frontier.py [--draws 2000] [--nulls 20000] [--seed 2026] [--quick]
     [--only NAME ...]

``outcome_bets.py`` bets a fixed +0.10 design: 0.575× at +0.10, but at +0.05 its power on the fixed
gate's val is 0.45–0.54 where the fixed gate has 0.80. Here every design is one e-process (a fair
bet's wealth whenever the arms are exchangeable within a task, so Ville's inequality holds at any
stopping time) plus one end-of-val test:

- accept as soon as the wealth reaches ``1/α_cross`` (``high``);
- reject (binding futility) as soon as a *futility process* falls to ``low`` — the wealth itself, or
  the wealth of another design (a smaller effect's, so that a +0.05 candidate is rarely cut);
- at the end of val, the joint swap p: task-level swaps of (a, b), each replaying the whole path
  (S = ∞ on a crossing, −∞ on futility, else an *end statistic*: the final log-wealth of the same or
  another design), p = share of swaps with S ≥ the observed (+1, seeded), accept if p ≤ α.

Designs: the bets of one design effect (``fixed``), a weighted mean of several designs' wealths
(``mix``, itself a fair bet's wealth: it pays log(1/weight) of the design that fits), and bets whose
effect is learned from the tasks already seen (``plug-in``: before task t the design effect is the
mean delta of tasks 1 … t − 1, shrunk to a prior of +0.10 with the weight of ``m`` tasks, on a grid of
0.01; a bet fixed before its task is seen, so the wealth stays a martingale). Every design's laws come
from the synthetic mix (seed 2026), not the τ² pool measured on, as ``outcome_bets.py``'s.

Printed per design, on the τ² rates (``--draws`` candidates per N, common random numbers: N reads a
prefix; the fixed exact gate through ``sprt_floor.fixed_power`` on the very same candidates): its
N80 at +0.10 (integer N, interpolated), its mean candidate rollouts there × the fixed gate's N80·3
(±2 SE), its power at +0.05 on the fixed gate's +0.05 N80 val against the fixed gate's on the same
candidates (paired difference ± 2 SE), and its type I on ``--nulls`` byte-identical τ² candidates at
its +0.10 N80 and at that +0.05 val (with a one-sided 95 % Clopper–Pearson bound), and what a null
costs × fixed. ``--synthetic`` repeats the type I on the synthetic mix.
The swap p stops drawing resamples once its count already exceeds α's share: the same decision as
all ``RESAMPLES``, fewer of them.

Found (session 24; docs/reference/benchmarks.md has the table): no design here reaches ≤ 0.6× at
+0.10 and keeps +0.05. The cheapest that keeps it is ``fixed .10 no-fut`` — the +0.10 bets with no
futility, the joint swap p of their final log-wealth at the end of val: 0.625 ± 0.015 (2,000
candidates per N), 0.597 ± 0.024 (3,000), 0.617 ± 0.018 (6,000, ``--seed 2027``), pooled 0.617 ± 0.010
(±2 SE); power at +0.05 0.012 ± 0.010 under the fixed gate's on the same 6,000 candidates; type I
0.0498, 0.0485 (at 225 tasks) and 0.0492 (synthetic) on 20,000 nulls each
(``--draws 3000 --nulls 20000 --only "fixed .10 no-fut"``, 707 s wall at load 13). Futility buys the
last 0.04× and costs a quarter of the +0.05 power (``fixed .10 fut-2.5``, the √left rows; on the
3,000 candidates where no futility spent 0.597, ``fut-4.5`` spent 0.592 and lost 0.15 of the +0.05
power, ``fut-3.5`` 0.584 and 0.22); mixtures
and the plug-in keep +0.05 and spend 0.61–0.67× (``mix4 fut(.05)-2.5``: 0.641 ± 0.016 pooled over
2,000 and 3,000 candidates, +0.05 power 0.002 ± 0.015 over the fixed gate's, type I 0.0480, 0.0477
and 0.0502 on 20,000 nulls each).

All at equal binary trials on both arms: the bets and the swap need each task's (a, b) exchangeable
under the null. With unequal trials a design bets on the first min(k) trials of each arm (trial j
against trial j); graded rewards need a design law over task means (any antisymmetric θ in (−1, 1)
keeps the level).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outcome_bets import design_steps  # noqa: E402
from sequential import real_rates  # noqa: E402
from sprt_floor import draw_outcomes, fixed_power  # noqa: E402

ALPHA = 0.05
POWER = 0.8
TRIALS = 3
RESAMPLES = 1000
BLOCK = 100
GRID = np.round(np.arange(0.01, 0.2501, 0.01), 2)  # design effects the plug-in chooses from

Wealth = Callable[[np.ndarray, np.ndarray], np.ndarray]


def design_pool() -> np.ndarray:
    import cost_per_decision as bench  # noqa: PLC0415  (a sibling that imports outcome_bets)

    return np.asarray(bench.synthetic_rates(np.random.default_rng(2026)))


def design_pool_other(seed: int) -> np.ndarray:
    """A synthetic-mix pool drawn afresh (not the design's own), for type I on synthetic nulls."""
    import cost_per_decision as bench  # noqa: PLC0415

    return np.asarray(bench.synthetic_rates(np.random.default_rng(seed + 17)))


_STEPS: dict[float, np.ndarray] = {}


def steps_at(effect: float) -> np.ndarray:
    """log(1 + θ(a, b)) of the design for ``effect`` on the synthetic mix (cached)."""
    key = round(float(effect), 4)
    if key not in _STEPS:
        _STEPS[key] = design_steps(design_pool(), key, TRIALS)
    return _STEPS[key]


def fixed(effect: float) -> Wealth:
    steps = steps_at(effect)
    return lambda a, b: np.cumsum(steps[a, b], axis=-1)


def mix(effects: tuple[float, ...], weights: tuple[float, ...]) -> Wealth:
    """The weighted mean of the designs' wealths (weights summing to 1): a fair bet's wealth."""
    logw = np.log(np.asarray(weights) / np.sum(weights))

    def wealth(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        paths = [lw + np.cumsum(steps_at(e)[a, b], axis=-1) for lw, e in zip(logw, effects, strict=True)]
        return np.asarray(np.logaddexp.reduce(np.stack(paths), axis=0))

    return wealth


def plug_in(prior: float, m: float, lo: float = 0.02, hi: float = 0.2) -> Wealth:
    """Bets for the effect estimated from the tasks before each one (shrunk to ``prior`` with weight
    ``m`` tasks, clipped to [lo, hi], on :data:`GRID`): predictable, so still a fair bet's wealth."""
    table = np.stack([steps_at(e) for e in GRID])

    def wealth(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        d = (a - b) / TRIALS
        seen = np.cumsum(d, axis=-1) - d  # the tasks before each one
        count = np.arange(a.shape[-1])
        estimate = np.clip((m * prior + seen) / (m + count), lo, hi)
        index = np.rint((estimate - GRID[0]) / 0.01).astype(int)
        return np.cumsum(table[index, a, b], axis=-1)

    return wealth


@dataclass
class Design:
    name: str
    wealth: Wealth
    high: float = float(np.log(1 / ALPHA))
    low: float = -np.inf
    horizon: float = 0.0  # futility at low − horizon·√(tasks left in val): lenient while much is left
    futility: Wealth | None = None  # the process futility reads; the wealth itself if None
    end: Wealth | None = None  # the end statistic's process (its last value); the wealth's if None
    note: str = field(default="")

    def statistic(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(S, code, tasks used) of rows of (a, b): S = ∞ crossed, −∞ futile, else the end statistic."""
        up = self.wealth(a, b)
        down = up if self.futility is None else self.futility(a, b)
        flat = up.reshape(-1, up.shape[-1])
        n = flat.shape[1]
        lows = self.low - self.horizon * np.sqrt(n - 1 - np.arange(n))
        hit_up, hit_down = flat >= self.high, down.reshape(flat.shape) <= lows
        t_up = np.where(hit_up.any(axis=1), hit_up.argmax(axis=1), n)
        t_down = np.where(hit_down.any(axis=1), hit_down.argmax(axis=1), n)
        code = np.where(t_up < t_down, 1, np.where(t_down < t_up, -1, 0))
        end = flat[:, -1] if self.end is None else self.end(a, b).reshape(flat.shape)[:, -1]
        s = np.where(code == 1, np.inf, np.where(code == -1, -np.inf, end))
        used = np.minimum(np.minimum(t_up, t_down) + 1, n)
        shape = up.shape[:-1]
        return s.reshape(shape), code.reshape(shape), used.reshape(shape)

    def swap_accepts(self, a: np.ndarray, b: np.ndarray, observed: float, seed: int) -> bool:
        """The joint swap p ≤ α for one candidate that reached the end of val (decision only: stops
        once more than α's share of the ``RESAMPLES`` swaps reach S ≥ the observed)."""
        flips = np.random.default_rng(seed).random((RESAMPLES, a.size)) < 0.5
        limit = int(np.floor(ALPHA * (RESAMPLES + 1))) - 1  # count ≤ limit ⇔ (count + 1)/(R + 1) ≤ α
        count = 0
        for start in range(0, RESAMPLES, BLOCK):
            f = flips[start : start + BLOCK]
            s, _, _ = self.statistic(np.where(f, b, a), np.where(f, a, b))
            count += int(np.sum(s >= observed - 1e-9))
            if count > limit:
                return False
        return True

    def decide(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(accepted, tasks paid) of candidates × tasks (a, b)."""
        s, code, used = self.statistic(a, b)
        accepted = code == 1
        for i in np.flatnonzero(code == 0):
            accepted[i] = self.swap_accepts(a[i], b[i], float(s[i]), int(i))
        return accepted, used.astype(float)


def fixed_n80(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(N80, SE) of the fixed exact gate on these candidates, integer N, interpolated."""
    seen: dict[int, float] = {}

    def power(n: int) -> float:
        if n not in seen:
            seen[n] = float(fixed_power(a[:, :n] - b[:, :n]).mean())
        return seen[n]

    return _n80(power, a.shape[1], len(a))


def _n80(power: Callable[[int], float], top: int, draws: int) -> tuple[float, float]:
    if power(top) < POWER:
        return float("nan"), float("nan")
    lo, hi = 1, top
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power(mid) >= POWER else (mid + 1, hi)
    p0, p1 = power(lo - 1), power(lo)
    left, right = max(lo - 3, 1), min(lo + 2, top)
    slope = max(p1 - p0, (power(right) - power(left)) / (right - left), 1e-6)
    return lo - 1 + (POWER - p0) / max(p1 - p0, 1e-9), float(np.sqrt(POWER * (1 - POWER) / draws) / slope)


def design_n80(design: Design, a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """(N80, SE, mean tasks paid there) of ``design`` at integer N on these candidates."""
    seen: dict[int, tuple[float, float]] = {}

    def at(n: int) -> tuple[float, float]:
        if n not in seen:
            accepted, used = design.decide(a[:, :n], b[:, :n])
            seen[n] = float(accepted.mean()), float(used.mean())
        return seen[n]

    n80, se = _n80(lambda n: at(n)[0], a.shape[1], len(a))
    if np.isnan(n80):
        return n80, se, float("nan")
    lo = int(np.floor(n80)) + 1
    share = n80 - (lo - 1)
    return n80, se, at(lo - 1)[1] + share * (at(lo)[1] - at(lo - 1)[1])


def type_one(design: Design, pool: np.ndarray, n: int, nulls: int, seed: int) -> tuple[float, float, float]:
    """(false-accept rate, its one-sided 95 % Clopper–Pearson bound, mean tasks paid) on ``nulls``
    byte-identical candidates at val size ``n``."""
    a, b = draw_outcomes(np.random.default_rng(seed), pool, 0.0, TRIALS, (nulls, n))
    accepted, used = design.decide(a, b)
    k = int(accepted.sum())
    return k / nulls, float(sps.beta.ppf(0.95, k + 1, nulls - k)), float(used.mean())


def designs() -> list[Design]:
    """The designs measured (see the module docstring); names say effect, futility and end."""
    low = -2.5
    f05 = fixed(0.05)
    mix4 = mix((0.03, 0.05, 0.10, 0.15), (0.25, 0.25, 0.25, 0.25))
    return [
        Design("fixed .10 fut-2.5", fixed(0.10), low=low, note="outcome_bets.py's"),
        Design("fixed .10 no-fut", fixed(0.10)),
        Design("fixed .10 fut(.05)-2.5", fixed(0.10), low=low, futility=f05),
        Design("fixed .10 fut-3.5", fixed(0.10), low=-3.5),
        Design("fixed .10 fut-4.5", fixed(0.10), low=-4.5),
        Design("fixed .10 fut(.05)-2.5 end .05", fixed(0.10), low=low, futility=f05, end=f05),
        Design("fixed .08 fut(.05)-2.5 end .05", fixed(0.08), low=low, futility=f05, end=f05),
        Design("fixed .12 no-fut", fixed(0.12)),
        Design("fixed .10 fut(.05)-3.5 end mix4", fixed(0.10), low=-3.5, futility=f05, end=mix4),
        Design("mix .05/.10 (½,½) fut-2.5", mix((0.05, 0.10), (0.5, 0.5)), low=low),
        Design("mix .05/.10 (½,½) fut(.05)-2.5", mix((0.05, 0.10), (0.5, 0.5)), low=low, futility=f05),
        Design("mix4 fut(.05)-2.5", mix4, low=low, futility=f05),
        Design("mix4 fut(.05)-2.5 α×.8", mix4, high=float(np.log(1 / 0.04)), low=low, futility=f05),
        Design("mix4 fut(.05)-3.5", mix4, low=-3.5, futility=f05),
        Design("mix4 no-fut", mix4),
        Design("mix .05/.10 (.1,.9) fut(.05)-2.5", mix((0.05, 0.10), (0.1, 0.9)), low=low, futility=f05),
        Design("mix4 fut(.10)-2.5", mix4, low=low, futility=fixed(0.10)),
        Design("mix4 fut(.10)-1.5-.16√left", mix4, low=-1.5, horizon=0.16, futility=fixed(0.10)),
        Design("fixed .10 fut-1.5-.16√left end mix4", fixed(0.10), low=-1.5, horizon=0.16, end=mix4),
        Design("fixed .10 fut-1.5-.16√left", fixed(0.10), low=-1.5, horizon=0.16),
        Design("plug-in m=20 fut(.05)-2.5", plug_in(0.10, 20), low=low, futility=f05),
        Design("plug-in m=20 fut-2.5", plug_in(0.10, 20), low=low),
        Design("plug-in m=20 no-fut", plug_in(0.10, 20)),
    ]


def measure(design: Design, draws: int, nulls: int, seed: int, base: dict[str, float], data: dict) -> None:
    a10, b10 = data["a10"], data["b10"]
    n, se, paid = design_n80(design, a10, b10)
    if np.isnan(n):
        print(f"{design.name:<36} +0.10: below 80 % at {a10.shape[1]} tasks", flush=True)
        return
    ratio = paid * TRIALS / base["n10"]
    err = 2 * ratio * float(np.hypot(se / n, base["se10"] / base["n10"]))
    a05, b05 = data["a05"], data["b05"]
    val = int(round(base["n05"]))
    accepted, used05 = design.decide(a05[:, :val], b05[:, :val])
    fixed_acc = data["fixed05"]
    diff = accepted.astype(float) - fixed_acc
    diff_se = float(diff.std(ddof=1) / np.sqrt(draws))
    pool = real_rates()
    t1 = type_one(design, pool, int(round(n)), nulls, seed + 1)
    t2 = type_one(design, pool, val, nulls, seed + 2)
    t3 = type_one(design, design_pool_other(seed), int(round(n)), nulls, seed + 3)
    print(
        f"{design.name:<36} N80 {n:6.1f} ×fixed {ratio:.3f} ± {err:.3f} | +0.05 at N={val}: "
        f"{accepted.mean():.3f} vs fixed {fixed_acc.mean():.3f} (Δ {diff.mean():+.3f} ± {2 * diff_se:.3f}), "
        f"paid ×{used05.mean() / base['n05']:.2f} | type I N={int(round(n))} {t1[0]:.4f} (≤{t1[1]:.4f}) "
        f"null ×{t1[2] * TRIALS / base['n10']:.2f}; N={val} {t2[0]:.4f} (≤{t2[1]:.4f}) | "
        f"synthetic nulls N={int(round(n))} {t3[0]:.4f} (≤{t3[1]:.4f})",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--nulls", type=int, default=20000)
    parser.add_argument("--base", type=int, default=20000, help="candidates per N for the fixed gate's N80")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="--draws 600 --nulls 3000 --base 4000")
    parser.add_argument("--only", nargs="*", default=None, help="designs whose name contains one of these")
    args = parser.parse_args(argv)
    if args.quick:
        args.draws, args.nulls, args.base = 600, 3000, 4000
    start = time.perf_counter()
    print("python benchmarks/bet_frontier.py " + " ".join(sys.argv[1:] if argv is None else argv), flush=True)
    rng = np.random.default_rng(args.seed)
    pool = real_rates()
    n10, se10 = fixed_n80(*draw_outcomes(rng, pool, 0.10, TRIALS, (args.base, 160)))
    n05, se05 = fixed_n80(*draw_outcomes(rng, pool, 0.05, TRIALS, (args.base, 400)))
    a10, b10 = draw_outcomes(rng, pool, 0.10, TRIALS, (args.draws, 160))
    a05, b05 = draw_outcomes(rng, pool, 0.05, TRIALS, (args.draws, 400))
    val = int(round(n05))
    fixed05 = fixed_power(a05[:, :val] - b05[:, :val]).astype(float)
    base = {"n10": n10 * TRIALS, "se10": se10 * TRIALS, "n05": float(val)}
    print(
        f"τ² rates; the fixed exact gate's N80 on {args.base:,} candidates per integer N: {n10:.1f} ± "
        f"{2 * se10:.1f} at +0.10, {n05:.1f} ± {2 * se05:.1f} at +0.05 (2 SE); the designs on {args.draws:,} "
        f"other candidates per N (the fixed gate's power at N={val} on them: {fixed05.mean():.3f}), "
        f"{args.nulls:,} nulls per type I; binomial SE of a power {np.sqrt(0.16 / args.draws):.3f}, "
        f"of a type I {np.sqrt(0.0475 / args.nulls):.4f}",
        flush=True,
    )
    data = {"a10": a10, "b10": b10, "a05": a05, "b05": b05, "fixed05": fixed05}
    for design in designs():
        if args.only and not any(o in design.name for o in args.only):
            continue
        measure(design, args.draws, args.nulls, args.seed, base, data)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
