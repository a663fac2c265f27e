"""The sequential gate against the fixed-n exact gate, and the val-reuse α budget on a loop.

Run: python benchmarks/sequential.py [candidates_per_cell] [seed] [trials] [part1]   (defaults 2000,
2026, 5; "part1" skips the loop part)

Per-task success rates are resampled from the public tau2-bench airline run (tests/data: the
seed arm and its three byte-identical null arms, 20 trials per task); every simulated
candidate draws its own N val tasks from them, 5 trials per arm (common seeds are not modelled:
the arms are independent Bernoulli draws). A true effect +δ is spread over the tasks with
headroom (as in gate_calibration.py), so the mean rate rises by δ where that fits under 1.

Part 1, per N = 30 / 100 / 300 and δ = 0 / +0.05 / +0.10 / +0.20: false-accept rate (δ = 0)
or power (δ > 0) of the fixed-n exact gate at α and of the sequential gate (efficacy e-process
at α_e, futility at gate_min_effect; at exhaustion the exact gate at α and the joint sequential
p-value ≤ α, from 2000 sign-flip resamples), and the sequential
gate's mean rollouts as a fraction of the fixed gate's (tasks used / N; both arms stop
together). The figures are ratios against the fixed-n gate measured in the same run.

Part 2: a loop gating 200 null candidates one after another against one best on one val
split (the best's rollouts reused, as a run does): P(any null accepted) under ``constant``
(every decision at α) and under ``basel`` (α_j = α·6/(π² j²)), with the count after 10, 50,
100 and 200 decisions.
"""

from __future__ import annotations

import json
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import alpha_budget
from pytest_capevolve._decide.stopping import split
from pytest_capevolve._stats.sequential import exhaustion_p, first_crossings

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "tau2-airline-v4-val-per-task.json"
ALPHA = 0.05
MIN_EFFECT = 0.05  # the spec's default gate_min_effect
TRIALS = 5
SIZES = (30, 100, 300)
EFFECTS = (0.0, 0.05, 0.10, 0.20)
RESAMPLES = 2000  # the joint p at exhaustion (the session uses 20000); fewer only costs power


def real_rates() -> np.ndarray:
    data = json.loads(DATA.read_text())
    ids = sorted(data["seed"])
    arms = ("seed", "c0_null5", "c0_null5b", "c0_null5c")
    return np.array([np.mean([r for a in arms for r in data[a][t]["trials"]]) for t in ids])


def lifted(rates: np.ndarray, effect: float) -> np.ndarray:
    """Rates raised by ``effect`` on average, spread over each row's headroom."""
    if not effect:
        return rates
    headroom = 1 - rates
    scale = headroom.mean(axis=-1, keepdims=True)
    return np.clip(rates + effect * headroom / np.maximum(scale, 1e-9), 0, 1)


def arm(rng: np.random.Generator, rates: np.ndarray) -> np.ndarray:
    """Candidates × tasks × trials of 0/1 rewards."""
    return (rng.random((*rates.shape, TRIALS)) < rates[..., None]).astype(float)


def cell(rng: np.random.Generator, pool: np.ndarray, n: int, effect: float, count: int) -> dict[str, float]:
    rates = rng.choice(pool, size=(count, n), replace=True)
    best, cand = arm(rng, rates), arm(rng, lifted(rates, effect))
    deltas = cand.mean(axis=2) - best.mean(axis=2)
    levels = split(ALPHA)
    code, used = first_crossings(
        deltas,
        alpha_efficacy=float(levels.efficacy),
        alpha_futility=float(levels.futility),
        min_effect=MIN_EFFECT,
    )
    fixed = np.zeros(count, dtype=bool)
    sequential = code == 1
    for i in range(count):
        result = stats.sign_flip_test(cand[i], best[i], alpha=ALPHA)
        fixed[i] = result.at_most(ALPHA)
        if code[i] == 0 and result.at_most(levels.exhaustion):  # the exact gate, and the joint p
            numerator, denominator = exhaustion_p(
                deltas[i], alpha_efficacy=float(levels.efficacy), n_resamples=RESAMPLES, seed=i
            )
            sequential[i] = Fraction(numerator, denominator) <= levels.alpha
    return {
        "fixed": float(fixed.mean()),
        "sequential": float(sequential.mean()),
        "rollouts": float(used.mean() / n),
        "early_accept": float((code == 1).mean()),
        "futility": float((code == -1).mean()),
    }


def null_loop(
    rng: np.random.Generator, pool: np.ndarray, n: int, loops: int, candidates: int
) -> dict[str, list[float]]:
    """P(any of the first J nulls accepted), per schedule, at J = 10, 50, 100, candidates."""
    checkpoints = [j for j in (10, 50, 100, candidates) if j <= candidates]
    first_accept = {s: np.full(loops, candidates + 1) for s in alpha_budget.SCHEDULES}
    levels = {
        s: [alpha_budget.alpha_for(s, ALPHA, j) for j in range(1, candidates + 1)] for s in first_accept
    }
    for loop in range(loops):
        rates = rng.choice(pool, size=n, replace=True)
        best = arm(rng, rates)  # one best, reused by every decision on this val split
        open_schedules = set(first_accept)
        for j in range(candidates):
            if not open_schedules:
                break
            result = stats.sign_flip_test(arm(rng, rates), best, alpha=ALPHA)
            for schedule in list(open_schedules):
                if result.at_most(levels[schedule][j]):
                    first_accept[schedule][loop] = j + 1
                    open_schedules.discard(schedule)
    return {s: [float(np.mean(first <= j)) for j in checkpoints] for s, first in first_accept.items()}


def main() -> None:
    global TRIALS
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 2026
    TRIALS = int(sys.argv[3]) if len(sys.argv) > 3 else TRIALS
    rng = np.random.default_rng(seed)
    pool = real_rates()
    levels = split(ALPHA)
    print(
        f"seed {seed}; {count} simulated candidates per cell; {TRIALS} trials per arm; α = {ALPHA} "
        f"(sequential: efficacy crosses at 1/α_e, α_e = {float(levels.efficacy):g}; at exhaustion the "
        f"exact gate and the joint p at α = {float(levels.exhaustion):g}; futility α_f = {float(levels.futility):g} at "
        f"gate_min_effect = {MIN_EFFECT})"
    )
    header = (
        f"{'N':>4} {'effect':>7} {'fixed FA/power':>15} {'seq FA/power':>13} {'seq − fixed':>12} "
        f"{'seq rollouts':>13} {'early acc':>10} {'futility':>9}"
    )
    print(header)
    start = time.perf_counter()
    for n in SIZES:
        for effect in EFFECTS:
            r = cell(rng, pool, n, effect, count)
            print(
                f"{n:>4} {effect:>+7.2f} {r['fixed']:>15.4f} {r['sequential']:>13.4f} "
                f"{r['sequential'] - r['fixed']:>+12.4f} {r['rollouts']:>12.1%} "
                f"{r['early_accept']:>10.3f} {r['futility']:>9.3f}"
            )
    print(f"(part 1: {time.perf_counter() - start:.1f} s)")
    if len(sys.argv) > 4 and sys.argv[4] == "part1":
        return
    loops, candidates, n = max(count // 4, 100), 200, 30
    start = time.perf_counter()
    loop = null_loop(rng, pool, n, loops, candidates)
    print(
        f"\n{loops} simulated loops × {candidates} null candidates gated one after another on one "
        f"val split of {n} tasks (one best, its rollouts reused): P(any null accepted) after J decisions"
    )
    print(f"{'schedule':>10} {'J=10':>8} {'J=50':>8} {'J=100':>8} {'J=200':>8}  bound Σα_j at J=200")
    for schedule, rates in loop.items():
        bound = alpha_budget.any_false_accept_bound(schedule, ALPHA, candidates)
        print(f"{schedule:>10} " + " ".join(f"{r:>8.3f}" for r in rates) + f"  {bound:.3f}")
    print(f"(part 2: {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
