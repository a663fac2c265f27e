"""False-accept rate and power of the gate rules on realistic noise.

Run: python benchmarks/gate_calibration.py [pairs]   (default 5000 simulated pairs per row)

Per-task success rates come from the public tau2-bench airline run (tests/data: seed plus its
three byte-identical null arms, 20 trials per task). Null pairs draw both arms from the same
rates; power pairs give the candidate +0.10 mean gain spread over the tasks with headroom.
Rows: the legacy paired rule Δ̄ > k·SE at k = 0.2 and 1.0, and the default exact gate, at
12 × 5 (the real tasks) and 30 × 5 (tasks resampled from the real rates).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from pytest_capevolve import _stats as stats

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "tau2-airline-v4-val-per-task.json"


def real_rates() -> np.ndarray:
    data = json.loads(DATA.read_text())
    ids = sorted(data["seed"])
    arms = ("seed", "c0_null5", "c0_null5b", "c0_null5c")
    return np.array([np.mean([r for a in arms for r in data[a][t]["trials"]]) for t in ids])


def legacy_accepts(cand: np.ndarray, best: np.ndarray, k: float) -> bool:
    d = cand.mean(axis=1) - best.mean(axis=1)
    se = d.std(ddof=1) / np.sqrt(d.size)
    return bool(d.mean() > k * se) if se > 0 else bool(d.mean() > 0)


def simulate(rates: np.ndarray, gain: float, pairs: int, rng: np.random.Generator) -> dict[str, float]:
    headroom = 1 - rates
    lifted = np.clip(rates + gain * headroom / headroom.mean(), 0, 1) if gain else rates
    hits = {"k=0.2": 0, "k=1.0": 0, "exact": 0}
    for _ in range(pairs):
        best = (rng.random((rates.size, 5)) < rates[:, None]).astype(float)
        cand = (rng.random((rates.size, 5)) < lifted[:, None]).astype(float)
        hits["k=0.2"] += legacy_accepts(cand, best, 0.2)
        hits["k=1.0"] += legacy_accepts(cand, best, 1.0)
        hits["exact"] += stats.sign_flip_test(cand, best, alpha=0.05).at_most(0.05)
    return {rule: count / pairs for rule, count in hits.items()}


def main() -> None:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    rng = np.random.default_rng(2026)
    rates12 = real_rates()
    rates30 = rng.choice(rates12, size=30, replace=True)
    print(f"{pairs} simulated pairs per cell; α = 0.05 for the exact gate")
    print(f"{'size':8} {'rule':8} {'false accept':>13} {'power @ +0.10':>14}")
    for label, rates in (("12 × 5", rates12), ("30 × 5", rates30)):
        null = simulate(rates, 0.0, pairs, rng)
        power = simulate(rates, 0.10, pairs, rng)
        for rule in ("k=0.2", "k=1.0", "exact"):
            print(f"{label:8} {rule:8} {null[rule]:13.3f} {power[rule]:14.3f}")
    print("binomial 2-sd tolerance on a 0.05 rate:", f"±{2 * np.sqrt(0.05 * 0.95 / pairs):.3f}")


if __name__ == "__main__":
    main()
