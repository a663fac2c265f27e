"""What a run-to-run shift does to a one-run gate, and what replicate blocks say about it.

Run: python benchmarks/replicate_blocks.py [sims]   (default 2000 simulated comparisons per row)

Per-task success rates come from the public tau2-bench airline run (tests/data: the seed and its
three byte-identical null arms), 12 tasks × 5 trials. The candidate is byte-identical to the best
(no true effect) except that each run shifts every one of its tasks together by a draw of
N(0, τ) on the log-odds — a provider's load, a cache, the time of day. Per row:

- the one-run exact gate's false-accept rate (α = 0.05), the baseline;
- how often `capevolve multirep` over 3 blocks claims a positive effect (`resolved`, Δ̄ > 0: the
  blocks agree and the 95 % t interval excludes 0), as a ratio to the baseline;
- the median drift ratio (block-to-block SD of Δ̄ / the paired SE; ≈ 1 without drift);
- for reference, the same two rates for a real +0.10 gain (power).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from pytest_capevolve import _stats as stats
from pytest_capevolve._stats.intervals import replicate_summary

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "tau2-airline-v4-val-per-task.json"
BLOCKS = 3


def real_rates() -> np.ndarray:
    data = json.loads(DATA.read_text())
    ids = sorted(data["seed"])
    arms = ("seed", "c0_null5", "c0_null5b", "c0_null5c")
    return np.array([np.mean([r for a in arms for r in data[a][t]["trials"]]) for t in ids])


def shifted(rates: np.ndarray, shift: float) -> np.ndarray:
    logit = np.log(np.clip(rates, 1e-3, 1 - 1e-3) / (1 - np.clip(rates, 1e-3, 1 - 1e-3)))
    moved = 1 / (1 + np.exp(-(logit + shift)))
    return np.where((rates <= 0) | (rates >= 1), rates, moved)  # always/never tasks stay put


def one_run(rates: np.ndarray, lifted: np.ndarray, tau: float, rng: np.random.Generator) -> tuple:
    cand_rates = shifted(lifted, rng.normal(0, tau)) if tau else lifted
    best = (rng.random((rates.size, 5)) < rates[:, None]).astype(float)
    cand = (rng.random((rates.size, 5)) < cand_rates[:, None]).astype(float)
    deltas, _ = stats.paired_deltas(cand, best)
    mean, se = stats.mean_se(deltas)
    return cand, best, float(mean), se


def simulate(rates: np.ndarray, gain: float, tau: float, sims: int, rng: np.random.Generator) -> dict:
    headroom = 1 - rates
    lifted = np.clip(rates + gain * headroom / headroom.mean(), 0, 1) if gain else rates
    gate_accepts = resolved = 0
    ratios = []
    for _ in range(sims):
        runs = [one_run(rates, lifted, tau, rng) for _ in range(BLOCKS)]
        cand, best, _, _ = runs[0]
        gate_accepts += stats.sign_flip_test(cand, best, alpha=0.05).at_most(0.05)
        summary = replicate_summary([r[2] for r in runs])
        resolved += summary.agreeing >= 2 and summary.mean > 0 and summary.ci_excludes_zero
        paired = [r[3] for r in runs if r[3]]
        if paired and summary.sd is not None:
            ratios.append(summary.sd / float(np.sqrt(np.mean(np.square(paired)))))
    return {
        "gate": gate_accepts / sims,
        "blocks": resolved / sims,
        "ratio": float(np.median(ratios)) if ratios else float("nan"),
    }


def main() -> None:
    sims = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rng = np.random.default_rng(2026)
    rates = real_rates()
    print(
        f"{sims} simulated comparisons per row; 12 tau2 tasks × 5 trials; α = 0.05; {BLOCKS} blocks pay {BLOCKS}× a run"
    )
    header = f"{'drift τ':>8} {'gate FA':>8} {'3-block FA':>11} {'FA ratio':>9} {'drift ratio':>12}"
    print(header + f" {'gate power':>11} {'3-block power':>14}")
    for tau in (0.0, 0.5, 1.0):
        null = simulate(rates, 0.0, tau, sims, rng)
        power = simulate(rates, 0.10, tau, sims, rng)
        ratio = null["blocks"] / null["gate"] if null["gate"] else float("nan")
        print(
            f"{tau:>8.1f} {null['gate']:>8.3f} {null['blocks']:>11.3f} {ratio:>9.2f} {null['ratio']:>12.2f}"
            f" {power['gate']:>11.3f} {power['blocks']:>14.3f}"
        )


if __name__ == "__main__":
    main()
