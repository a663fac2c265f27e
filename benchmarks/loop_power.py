"""Which α schedule keeps a loop's power: constant, lord and addis, measured.

Run: python benchmarks/loop_power.py [reps] [loops] [seed]   (defaults 300, 100, 2026)

Part 1, power by position. On a val split of N ∈ {12, 24, 50, 100} tasks × T ∈ {3, 5} trials
(per-task success rates resampled from the public tau2-bench airline run, tests/data), a real
edit — its rates lifted by +0.10 or +0.30 on average over the headroom, as in
benchmarks/sequential.py — is proposed at decision 1, 2, 5 or 10 of a loop; the decisions before
it are null candidates (the best's own rates: no better, no worse), gated against the best as a
loop gates them (an accepted null becomes the best). Each cell is the share of ``reps`` loops in
which the edit is accepted at the level its schedule gives it, ± its Monte Carlo SE. The same
random draws drive every schedule (seeded per loop), so the columns differ by the rule alone.

Part 2, loop-wide false accepts. ``loops`` loops of 100 decisions on each (N, T); each candidate
is, with probability 0.10, truly +0.10 better than the current best, 0.45 a null and 0.45 worse
(−0.10: "most loop candidates are clearly not better"). P(any false accept) is the share of loops
that accept a candidate no better than its best (a null or a worse one), ± SE; the mean number of
true accepts per loop beside it. A last line repeats part 2 with every candidate a null (the
case the schedules' "P(any false accept) ≤ α" is about).

Part 3, the issue-39 target: on 24 tasks × 3 trials, a +0.30 edit proposed right after one
clear null (its p > 0.5) is accepted with ≥ 80 % power under the default.

Schedules (``_decide/alpha_budget.py``): ``constant`` α every time; ``lord`` LORD++ (Ramdas et
al. 2017); ``addis`` (Tian & Ramdas 2019; its FWER form ADDIS-spending, 2021) discards a decision
with Δ̄ < 0 — it spends nothing — and tests at τ = 1/2 of LORD++'s level on the clock of the
decisions that counted.
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

ALPHA = 0.05
SCHEDULES = ("constant", "lord", "addis")
SIZES = ((12, 3), (12, 5), (24, 3), (24, 5), (50, 3), (50, 5), (100, 3), (100, 5))
EFFECTS = (0.10, 0.30)
POSITIONS = (1, 2, 5, 10)
DECISIONS = 100


def lowered(rates: np.ndarray, effect: float) -> np.ndarray:
    """Rates lowered by ``effect`` on average, spread over each row's room to fall."""
    return 1 - lifted(1 - rates, effect)


class Loop:
    """One loop's α state under one schedule: the decisions, accepts and discards so far."""

    def __init__(self, schedule: str) -> None:
        self.schedule, self.j = schedule, 0
        self.accepts: list[int] = []
        self.discarded: list[int] = []

    def gate(self, cand: np.ndarray, best: np.ndarray) -> tuple[bool, float]:
        """Decide the next candidate; (accepted, p)."""
        self.j += 1
        level = alpha_budget.alpha_for(self.schedule, ALPHA, self.j, self.accepts, self.discarded)
        result = stats.sign_flip_test(cand, best, alpha=float(level))
        accepted = result.at_most(level)
        if accepted:
            self.accepts.append(self.j)
        else:
            delta = stats.exact_mean_delta(cand, best)
            if alpha_budget.is_discarded(self.schedule, None if delta is None else str(delta), "reject"):
                self.discarded.append(self.j)
        return accepted, result.p_value


def draw(rng: np.random.Generator, rates: np.ndarray, trials: int) -> np.ndarray:
    return (rng.random((rates.size, trials)) < rates[:, None]).astype(float)


def edit_accepted(
    seed: int, schedule: str, pool: np.ndarray, n: int, trials: int, effect: float, at: int
) -> bool:
    rng = np.random.default_rng(seed)
    truth = rng.choice(pool, size=n)
    best = draw(rng, truth, trials)
    loop = Loop(schedule)
    for _ in range(at - 1):
        null = draw(rng, truth, trials)
        if loop.gate(null, best)[0]:
            best = null
    return loop.gate(draw(rng, lifted(truth, effect), trials), best)[0]


def loop_wide(
    seed: int, schedule: str, pool: np.ndarray, n: int, trials: int, mixed: bool
) -> tuple[int, int]:
    """(false accepts, true accepts) of one 100-decision loop."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(pool, size=n)
    best = draw(rng, truth, trials)
    loop = Loop(schedule)
    false = true = 0
    for _ in range(DECISIONS):
        kind = rng.random()
        if mixed and kind < 0.10:
            rates, good = lifted(truth, 0.10), True
        elif mixed and kind < 0.55:
            rates, good = lowered(truth, 0.10), False
        else:
            rates, good = truth, False
        cand = draw(rng, rates, trials)
        if loop.gate(cand, best)[0]:
            true += good
            false += not good
            truth, best = rates, cand
    return false, true


def after_a_clear_null(seed: int, schedule: str, pool: np.ndarray) -> bool | None:
    """24 × 3: a null first; when its p > 0.5, is the +0.30 edit after it accepted? None: p ≤ 0.5."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(pool, size=24)
    best = draw(rng, truth, 3)
    loop = Loop(schedule)
    accepted, p = loop.gate(draw(rng, truth, 3), best)
    if accepted or p <= 0.5:
        return None
    return loop.gate(draw(rng, lifted(truth, 0.30), 3), best)[0]


def share(values: list[float]) -> str:
    a = np.asarray(values, dtype=float)
    return f"{a.mean():.3f} ± {a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else 0:.3f}"


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    loops = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 2026
    pool = real_rates()
    started = time.perf_counter()
    print(f"seed {seed}; α = {ALPHA}; part 1: {reps} loops per cell; part 2: {loops} loops × {DECISIONS}")
    print("\npart 1 — P(a real edit proposed at decision d is accepted), the decisions before it nulls")
    print(f"{'N×T':>7} {'edit':>6} {'d':>3} " + " ".join(f"{s:>15}" for s in SCHEDULES))
    for n, trials in SIZES:
        for effect in EFFECTS:
            for at in POSITIONS:
                cells = [
                    share([edit_accepted(seed + i, s, pool, n, trials, effect, at) for i in range(reps)])
                    for s in SCHEDULES
                ]
                print(f"{f'{n}×{trials}':>7} {effect:>+6.2f} {at:>3} " + " ".join(f"{c:>15}" for c in cells))
    print(f"\npart 2 — over {DECISIONS} decisions: P(any false accept), mean true accepts per loop")
    print(f"{'N×T':>7} " + " ".join(f"{s + ' P(any false)':>22} {'true':>6}" for s in SCHEDULES))
    for n, trials in SIZES:
        cells = []
        for s in SCHEDULES:
            rows = [loop_wide(seed + i, s, pool, n, trials, True) for i in range(loops)]
            cells.append(f"{share([f > 0 for f, _ in rows]):>22} {np.mean([t for _, t in rows]):>6.2f}")
        print(f"{f'{n}×{trials}':>7} " + " ".join(cells))
    cells = []
    for s in SCHEDULES:
        rows = [loop_wide(seed + i, s, pool, 24, 3, False) for i in range(loops)]
        cells.append(f"{share([f > 0 for f, _ in rows]):>22} {'':>6}")
    print(f"{'24×3':>7} " + " ".join(cells) + "   (every candidate a null)")
    print("\npart 3 — 24×3: a +0.30 edit right after one clear null (p > 0.5)")
    for s in SCHEDULES:
        kept = [r for r in (after_a_clear_null(seed + i, s, pool) for i in range(4 * reps)) if r is not None]
        print(f"{s:>9}: accepted in {share(kept)} of {len(kept)} loops")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
