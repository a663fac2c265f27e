"""The grow policy's false-accept rate and power, beside the one-look gate.

Run: python benchmarks/grow_calibration.py [candidates] [seed]   (default 4000, seed 2026)

The policy under test is the one a loop follows: gate; if provisional (Δ̄ > 0, not accepted),
grow — num_trials more trials for the candidate and the best — and gate again at the pooled n;
at most two grows (three looks). Each look is the exact sign-flip gate at the level
``pytest_capevolve._decide.alpha_budget.look_schedule`` gives it (α/2, then α/4, α/4).

Per-task success rates: the public tau2-bench airline run (tests/data: the seed and its three
byte-identical null arms, 20 trials per task), resampled to 30 tasks. Null candidates draw both
arms from the same rates (what a byte-identical copy gives under a nondeterministic agent);
power candidates get +0.10 mean gain spread over the tasks with headroom. Rows:

- one look at α          today's gate without growth (grow_max_looks: 1)
- grow, spent α          the policy with the α-spending schedule (grow_max_looks: 3)
- grow, α every look     the naive policy: every look at the full α (what spending prevents)

The ratio column is each row's false-accept rate over α (≤ 1.00 is calibrated).
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide.alpha_budget import look_schedule

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "tau2-airline-v4-val-per-task.json"
ALPHA = Fraction(1, 20)
TRIALS = 5
TASKS = 30
MAX_LOOKS = 3


def real_rates() -> np.ndarray:
    data = json.loads(DATA.read_text())
    ids = sorted(data["seed"])
    arms = ("seed", "c0_null5", "c0_null5b", "c0_null5c")
    return np.array([np.mean([r for a in arms for r in data[a][t]["trials"]]) for t in ids])


def policy(cand: np.ndarray, best: np.ndarray, levels: list[Fraction]) -> tuple[bool, int]:
    """(accepted, looks taken) for one candidate whose arms hold every look's trials."""
    for look, level in enumerate(levels, start=1):
        n = TRIALS * look
        c, b = cand[:, :n], best[:, :n]
        if stats.sign_flip_test(c, b, alpha=float(level)).at_most(level):
            return True, look
        provisional = float(np.mean(c.mean(axis=1) - b.mean(axis=1))) > 0
        if not provisional:
            return False, look
    return False, len(levels)


def simulate(rates: np.ndarray, gain: float, candidates: int, rng: np.random.Generator) -> dict[str, tuple]:
    headroom = 1 - rates
    lifted = np.clip(rates + gain * headroom / headroom.mean(), 0, 1) if gain else rates
    rows = {
        "one look at α": [ALPHA],
        "grow, spent α": look_schedule(ALPHA, MAX_LOOKS),
        "grow, α every look": [ALPHA] * MAX_LOOKS,
    }
    accepts = dict.fromkeys(rows, 0)
    looks = dict.fromkeys(rows, 0)
    for _ in range(candidates):
        width = TRIALS * MAX_LOOKS
        best = (rng.random((rates.size, width)) < rates[:, None]).astype(float)
        cand = (rng.random((rates.size, width)) < lifted[:, None]).astype(float)
        for name, levels in rows.items():
            ok, taken = policy(cand, best, levels)
            accepts[name] += ok
            looks[name] += taken
    return {name: (accepts[name] / candidates, looks[name] / candidates) for name in rows}


def main() -> None:
    candidates = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 2026
    rng = np.random.default_rng(seed)
    rates = rng.choice(real_rates(), size=TASKS, replace=True)
    schedule = ", ".join(str(level) for level in look_schedule(ALPHA, MAX_LOOKS))
    print(
        f"seed {seed}; {candidates} null and {candidates} +0.10 candidates; {TASKS} tasks × {TRIALS} trials a look"
    )
    print(f"α = {ALPHA}; spending schedule over {MAX_LOOKS} looks: {schedule}")
    null = simulate(rates, 0.0, candidates, rng)
    power = simulate(rates, 0.10, candidates, rng)
    # binomial 95% upper bound on a false-accept rate, so "≤ α" is read with its noise
    print(
        f"{'policy':22}{'false accept':>13}{'÷ α':>7}{'95% upper':>11}{'power @ +0.10':>15}{'mean looks':>12}"
    )
    for name in null:
        rate, _ = null[name]
        upper = stats_upper(rate, candidates)
        print(
            f"{name:22}{rate:>13.4f}{rate / float(ALPHA):>7.2f}{upper:>11.4f}"
            f"{power[name][0]:>15.4f}{power[name][1]:>12.2f}"
        )
    base = power["one look at α"][0]
    print(f"power of the spent-α grow policy ÷ the one-look gate: {power['grow, spent α'][0] / base:.2f}")


def stats_upper(rate: float, n: int) -> float:
    from scipy import stats as sps

    hits = round(rate * n)
    return float(sps.beta.ppf(0.975, hits + 1, n - hits)) if hits < n else 1.0


if __name__ == "__main__":
    main()
