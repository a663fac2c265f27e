"""Issue 40's floor, computed: Wald's SPRT on the same paired per-task outcomes as
``cost_per_decision.py``, tuned by simulation to the fixed-n exact gate's α and the 80 % power it is
compared at, as a ratio to that gate's rollouts.

Run: python benchmarks/sprt_floor.py [--paths 20000] [--seed 2026] [--trials 3] [--quick]
(858 s wall, 127 s CPU, at load 9–14 on 2 cores; ``--quick``, 2,000 paths: 73 s wall)

By the Wald–Wolfowitz theorem, among all tests of a simple null P₀ against a simple alternative P₁
(sequential or not) with type I ≤ α and power ≥ 1 − β, Wald's SPRT with those error rates expects
the fewest observations, under P₁ and under P₀ alike. So the SPRT's expected tasks at exactly
α = 0.05 and power 0.80 is a floor on what any design can spend for the same decision, and
``E₁[N] / N80(fixed exact)`` is the least ×fixed any design can print.

One observation is one task: the candidate's and the best's number of successes over ``trials``
trials, (a, b) — the whole paired outcome, not only its delta. Its law at a true effect +δ is
:func:`outcome_law` (a task drawn from the pool, the candidate's rate lifted as
``cost_per_decision.population`` lifts it). The SPRT runs on actually drawn tasks (a rate from
the pool, Bernoulli trials on both arms), with its real overshoot; its thresholds (lo, hi) are
tuned on one set of paths so that P₀(cross hi first) = α and P₁(cross hi first) = 0.80, then
every printed rate and mean is measured on a fresh set, with its Monte Carlo standard error.

Two nulls, two floors:

- ``SPRT vs τ² null``: P₀ = the outcome law of a byte-identical candidate on the same pool (the
  nulls ``cost_per_decision.py`` measures type I on). This is the floor for the issue's
  criterion read literally (type I ≤ 5 % on these nulls), but the test knows the law of the
  per-task rates: it is valid for these nulls only.
- ``SPRT vs exch. null``: P₀ = Q, the law nearest P₁ (in KL) among the laws under which the two
  arms are exchangeable within a task, q(a, b) = (p₁(a, b) + p₁(b, a)) / 2. Exchangeable arms are
  exactly what the exact gate's sign-flip test holds its level under (common random numbers make
  any such law a possible null), so any design that keeps that promise holds α under Q, and pays at
  least this SPRT's E₁[N]. It still knows P₁, the effect and its law, which no gate does.
- ``SPRT Δ vs sym. Δ``: the same, reading only each task's delta a − b (what the exact gate reads):
  P₁'s delta law against its symmetrisation (``cost_per_decision``'s oracle SPRT, here at the matched
  error rates). The gap between this row and the one above is what the delta throws away: the
  level a task's successes sit at, which tells how much headroom its lift had.

The denominator, the fixed-n exact gate's N80, is measured here at integer N with ``--paths``
candidates per N (common random numbers: N reads a prefix), through the exact one-sided sign-flip
law of the task deltas (checked against the package's rule on the first candidates), interpolated
between the last N under 80 % and the first over; its standard error is the power's over the local
slope. Columns: ``type I`` under the null the SPRT was tuned at, ``b.-id.`` under byte-identical
candidates on the table's own rates (the nulls ``cost_per_decision.py`` measures type I on).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sequential import lifted, real_rates  # noqa: E402
from trials_first import _rule, null_tail  # noqa: E402

from pytest_capevolve._decide.verdict import GateConfig  # noqa: E402

ALPHA = 0.05
POWER = 0.8
EFFECTS = (0.05, 0.10)


def outcome_law(pool: np.ndarray, effect: float, trials: int) -> np.ndarray:
    """P(a, b): the candidate's a and the best's b successes out of ``trials`` on one task drawn from
    ``pool`` (uniformly), the candidate at the lifted rate — a (trials + 1)² array summing to 1."""
    grid = np.arange(trials + 1)
    up = lifted(pool[None, :], effect)[0]
    cand = sps.binom.pmf(grid[None, :], trials, up[:, None])
    best = sps.binom.pmf(grid[None, :], trials, pool[:, None])
    return np.asarray(cand.T @ best / pool.size)


def exchangeable(law: np.ndarray) -> np.ndarray:
    """The law nearest ``law`` in KL(law ‖ ·) under which the arms are exchangeable: (p + pᵀ) / 2."""
    return np.asarray((law + law.T) / 2)


def _by_delta(law: np.ndarray) -> np.ndarray:
    """``law`` over (a, b) replaced in every cell by the probability of that cell's delta a − b."""
    size = law.shape[0]
    delta = np.subtract.outer(np.arange(size), np.arange(size))
    by_delta = np.bincount((delta + size - 1).ravel(), weights=law.ravel(), minlength=2 * size - 1)
    return np.asarray(by_delta[delta + size - 1])


def draw_outcomes(
    rng: np.random.Generator, pool: np.ndarray, effect: float, trials: int, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Tasks as the benchmark draws them: a rate from ``pool`` per task, ``trials`` Bernoulli rewards
    per arm, the candidate's at the lifted rate; (a, b) success counts of shape ``shape``."""
    rates = rng.choice(pool, size=shape, replace=True)
    up = lifted(rates, effect) if effect else rates
    a = (rng.random((*shape, trials)) < up[..., None]).sum(axis=2)
    b = (rng.random((*shape, trials)) < rates[..., None]).sum(axis=2)
    return a, b


@dataclass
class Paths:
    """Cumulative log-likelihood ratios of SPRT paths (paths × tasks, float32), drawn under one law."""

    llr: np.ndarray

    def run(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        """(crossed hi first, tasks used) of every path with thresholds (lo, hi); a path that stays
        inside to its last task is counted as not crossing hi, at its full length (``stuck``)."""
        up = self.llr >= hi
        down = self.llr <= lo
        length = self.llr.shape[1]
        t_up = np.where(up.any(axis=1), up.argmax(axis=1), length)
        t_down = np.where(down.any(axis=1), down.argmax(axis=1), length)
        used = np.minimum(np.minimum(t_up, t_down) + 1, length)
        return t_up < t_down, used.astype(float)

    def stuck(self, lo: float, hi: float) -> int:
        inside = (self.llr > lo) & (self.llr < hi)
        return int(inside.all(axis=1).sum())


def sprt_paths(
    rng: np.random.Generator,
    pool: np.ndarray,
    effect: float,
    trials: int,
    step: np.ndarray,
    count: int,
    length: int,
    chunk: int = 2000,
) -> Paths:
    """``count`` SPRT paths of ``length`` tasks drawn at ``effect``, each task's LLR ``step[a, b]``."""
    parts = []
    for start in range(0, count, chunk):
        a, b = draw_outcomes(rng, pool, effect, trials, (min(chunk, count - start), length))
        parts.append(np.cumsum(step[a, b], axis=1, dtype=np.float64).astype(np.float32))
    return Paths(np.concatenate(parts))


def tune(null: Paths, alt: Paths, alpha: float, power: float) -> tuple[float, float]:
    """Thresholds (lo, hi) at which ``null`` crosses hi first with rate ``alpha`` and ``alt`` with
    rate ``power``: alternating bisections from Wald's (ln(β/(1 − α)), ln((1 − β)/α)) — hi on the
    null's rate (falling in hi), lo on the alternative's (falling in lo)."""
    lo, hi = np.log((1 - power) / (1 - alpha)), np.log(power / alpha)
    for _ in range(4):
        a, b = hi - 3.0, hi + 6.0
        for _ in range(18):
            mid = (a + b) / 2
            a, b = (mid, b) if null.run(lo, mid)[0].mean() > alpha else (a, mid)
        hi = b
        a, b = lo - 6.0, lo + 2.0  # power falls as lo rises
        for _ in range(18):
            mid = (a + b) / 2
            a, b = (mid, b) if alt.run(mid, hi)[0].mean() >= power else (a, mid)
        lo = a
    return float(lo), float(hi)


class Floor(NamedTuple):
    name: str
    effect: float
    tasks: float  # E₁[N]
    tasks_se: float
    power: float
    type_one: float  # under the null it was tuned at
    type_one_tau: float  # under the byte-identical null on the pool (the benchmark's nulls)
    null_tasks: float  # E[N] under the byte-identical null
    stuck: int


def floor(
    rng: np.random.Generator,
    pool: np.ndarray,
    effect: float,
    trials: int,
    against: str,
    paths: int,
    alpha: float = ALPHA,
) -> Floor:
    """The SPRT of P₁ (``effect``) against ``against`` ("tau" for the byte-identical null's law,
    "exch" for :func:`exchangeable`, "delta" for the delta's law against its symmetrisation), tuned on ``paths`` paths per law, measured on as many fresh ones."""
    p1 = law = outcome_law(pool, effect, trials)
    p0 = outcome_law(pool, 0.0, trials) if against == "tau" else exchangeable(p1)
    if against == "delta":  # the delta a − b alone: its law against its symmetrisation
        p1, p0 = (_by_delta(law) for law in (p1, p0))
    with np.errstate(divide="ignore"):
        step = np.log(p1) - np.log(p0)
    step = np.where(p1 > 0, step, -50.0)  # an outcome P₁ cannot give rejects at once
    length = int(np.ceil(20 / float(np.sum(law * step))))  # ~ 7 × Wald's E₁[N] at the bounds

    # an SPRT against Q reads its type I under Q: draw a path of Q by drawing the pair and swapping it
    # with probability ½ (Q is P₁ symmetrised)
    def null_paths(count: int) -> Paths:
        if against == "tau":
            return sprt_paths(rng, pool, 0.0, trials, step, count, length)
        parts = []
        for start in range(0, count, 2000):
            rows = min(2000, count - start)
            a, b = draw_outcomes(rng, pool, effect, trials, (rows, length))
            swap = rng.random((rows, length)) < 0.5
            a, b = np.where(swap, b, a), np.where(swap, a, b)
            parts.append(np.cumsum(step[a, b], axis=1, dtype=np.float64).astype(np.float32))
        return Paths(np.concatenate(parts))

    lo, hi = tune(null_paths(paths), sprt_paths(rng, pool, effect, trials, step, paths, length), alpha, POWER)
    alt = sprt_paths(rng, pool, effect, trials, step, paths, length)
    crossed, used = alt.run(lo, hi)
    null_crossed, _ = null_paths(paths).run(lo, hi)
    tau = sprt_paths(rng, pool, 0.0, trials, step, paths, length)
    tau_crossed, tau_used = tau.run(lo, hi)
    return Floor(
        name={"tau": "SPRT vs τ² null", "exch": "SPRT vs exch. null", "delta": "SPRT Δ vs sym. Δ"}[against],
        effect=effect,
        tasks=float(used.mean()),
        tasks_se=float(used.std(ddof=1) / np.sqrt(paths)),
        power=float(crossed.mean()),
        type_one=float(null_crossed.mean()),
        type_one_tau=float(tau_crossed.mean()),
        null_tasks=float(tau_used.mean()),
        stuck=alt.stuck(lo, hi) + tau.stuck(lo, hi),
    )


def fixed_power(deltas: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """Which rows of integer task deltas (candidates × tasks) the exact one-sided sign-flip test
    accepts at ``alpha``: p = P(Σ s·|d| ≥ Σ d) under fair signs (:func:`trials_first.null_tail`, exact),
    one law per multiset of magnitudes."""
    trials = int(np.abs(deltas).max(initial=1))
    counts = np.stack([(np.abs(deltas) == k).sum(axis=1) for k in range(1, trials + 1)], axis=1)
    tails: dict[tuple[int, ...], np.ndarray] = {}
    out = np.zeros(len(deltas), dtype=bool)
    for i, key in enumerate(map(tuple, counts.tolist())):
        if key not in tails:
            tails[key] = null_tail(np.repeat(np.arange(1, trials + 1), key))
        span = sum((k + 1) * c for k, c in enumerate(key))
        out[i] = tails[key][int(deltas[i].sum()) + span] <= alpha
    return out


class FixedN80(NamedTuple):
    n80: float
    se: float
    type_one: float  # the fixed gate's false-accept rate at round(n80) on the pool's nulls


def fixed_n80(rng: np.random.Generator, pool: np.ndarray, effect: float, trials: int, paths: int) -> FixedN80:
    """The fixed-n exact gate's 80 % val size at ``effect``, at integer N on ``paths`` candidates
    (a prefix of the same candidates per N), interpolated linearly between the N either side."""
    top = 8
    seen: dict[int, float] = {}

    def power_at(n: int) -> float:
        if n not in seen:
            seen[n] = float(fixed_power(a[:, :n] - b[:, :n]).mean())
        return seen[n]

    while True:
        top *= 2
        a, b = draw_outcomes(rng, pool, effect, trials, (paths, top))
        seen.clear()
        if power_at(top) >= POWER:
            break
    lo, hi = 1, top
    while lo < hi:  # the smallest N at 80 %, assuming power grows with N (it does, give or take a task)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= POWER else (mid + 1, hi)
    below, above = power_at(lo - 1), power_at(lo)
    share = (POWER - below) / (above - below)
    wide = power_at(min(lo + 2, top)) - power_at(max(lo - 3, 0))
    slope = max(above - below, wide / (min(lo + 2, top) - max(lo - 3, 0)), 1e-6)
    se = np.sqrt(POWER * (1 - POWER) / paths) / slope
    check = slice(0, 200)  # the fast path is the package's rule
    fast = fixed_power(a[check, :lo] - b[check, :lo])
    cand, best = ones(a[check, :lo], b[check, :lo], trials)
    ruled = [_rule(c, d, GateConfig(alpha=ALPHA)) for c, d in zip(cand, best, strict=True)]
    assert fast.tolist() == ruled, "the fast sign-flip path disagrees with the package's exact rule"
    n = lo - 1 + share
    na, nb = draw_outcomes(rng, pool, 0.0, trials, (paths, int(round(n))))
    return FixedN80(float(n), float(se), float(fixed_power(na - nb).mean()))


def ones(a: np.ndarray, b: np.ndarray, trials: int) -> tuple[np.ndarray, np.ndarray]:
    """Success counts as 0/1 reward arrays (candidates × tasks × trials) for the package's rule."""
    grid = np.arange(trials)
    return (grid < a[..., None]).astype(float), (grid < b[..., None]).astype(float)


def report(name: str, pool: np.ndarray, rng: np.random.Generator, paths: int, trials: int) -> list[str]:
    lines = [f"\n{name}: {trials} trials per task; {paths:,} paths per law and rate (fresh ones measured)"]
    lines.append(
        f"{'design':<20} {'effect':>6} {'E1[N]':>7} {'N80 fixed':>10} {'×fixed (±2 SE)':>17} "
        f"{'power':>6} {'type I':>7} {'b.-id.':>6} {'null ×fixed':>11}"
    )
    for effect in EFFECTS:
        base = fixed_n80(rng, pool, effect, trials, paths)
        lines.append(
            f"{'fixed exact':<20} {effect:>+6.2f} {base.n80:>7.1f} {base.n80:>10.1f} {1.0:>17.2f} "
            f"{POWER:>6.2f} {base.type_one:>7.3f} {base.type_one:>6.3f} {1.0:>11.2f}"
        )
        for against in ("delta", "exch", "tau"):
            f = floor(rng, pool, effect, trials, against, paths)
            ratio = f.tasks / base.n80
            err = 2 * ratio * np.hypot(f.tasks_se / f.tasks, base.se / base.n80)
            lines.append(
                f"{f.name:<20} {effect:>+6.2f} {f.tasks:>7.1f} {base.n80:>10.1f} "
                f"{ratio:>8.3f} ± {err:.3f}   {f.power:>6.3f} {f.type_one:>7.3f} {f.type_one_tau:>6.3f} "
                f"{f.null_tasks / base.n80:>11.2f}" + (f"  ({f.stuck} paths stuck)" if f.stuck else "")
            )
    se_rate = np.sqrt(POWER * (1 - POWER) / paths), np.sqrt(ALPHA * (1 - ALPHA) / paths)
    lines.append(f"(binomial SE of a power {se_rate[0]:.4f}, of a type I {se_rate[1]:.4f})")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--paths", type=int, default=20000, help="SPRT paths and fixed-gate candidates per law"
    )
    parser.add_argument("--trials", type=int, default=3, help="trials per task (the spec's num_trials)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="2,000 paths (SEs about 3× larger)")
    args = parser.parse_args(argv)
    paths = 2000 if args.quick else args.paths
    start = time.perf_counter()
    print("python benchmarks/sprt_floor.py " + " ".join(sys.argv[1:] if argv is None else argv))
    rng = np.random.default_rng(args.seed)
    from cost_per_decision import synthetic_rates  # noqa: PLC0415  (a sibling; imports this one)

    for name, pool in (
        ("τ²-bench airline per-task rates", real_rates()),
        ("synthetic mix (⅓ near 0, ⅓ near 1, ⅓ uniform)", synthetic_rates(rng)),
    ):
        print("\n".join(report(name, pool, rng, paths, args.trials)), flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
