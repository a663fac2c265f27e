"""An LLM judge's noise measured apart from the agent's: the split, and the gate's false accepts.

Simulates paired evaluations with known noise: n tasks, each with a success probability p_t
(the agent's own trial-to-trial spread is Bernoulli(p_t)); the judge flips each verdict with
probability q (its noise), and each rollout's output is scored r times, the reward being the
mean. Candidates are **null** (the same agent as the best), so every accept is a false one.
For each mix it prints

- the judge's share of Var(Δ̄) as estimated from the re-scores (``_stats/judge_noise.split``,
  median over replicates) against the truth, q(1−q)/r against (1−2q)² p(1−p) + q(1−q)/r;
- the false-accept rate at α = 0.05 of: the gate's exact sign-flip test on the averaged
  re-scores (``_stats/sign_flip``); a z-test Δ̄ > z·SE with the SE of the deltas (which holds
  the judge's part: the correction); and the same z-test with the judge's part taken out of
  the SE (what a gate that took the scorer for exact would claim: without the correction);
- whether the split says more re-scores buy more than more trials.

    python benchmarks/judge_noise.py [--replicates N] [--tasks N] [--trials K] [--rescores R]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from pytest_capevolve._stats.arms import sign_flip_test
from pytest_capevolve._stats.judge_noise import arm_within, split

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from unit.test_judge_noise import rescores_pay_more  # noqa: E402  the advice as r < r*

ALPHA = 0.05
MIXES = [  # (spread of p_t around 0.5, judge flip probability q)
    ("agent-dominated", 0.45, 0.02),
    ("balanced", 0.3, 0.12),
    ("judge-dominated", 0.05, 0.3),
]


def arm(rng: np.random.Generator, p: np.ndarray, k: int, r: int, q: float) -> np.ndarray:
    """tasks × k × r re-scores: the agent's outcome, each re-score flipped with probability q."""
    outcome = rng.random((p.size, k, 1)) < p[:, None, None]
    flips = rng.random((p.size, k, r)) < q
    return (outcome != flips).astype(float)


def truth(p: np.ndarray, k: int, r: int, q: float) -> float:
    judge = np.full(p.size, q * (1 - q) / (k * r))  # per task-arm mean, the same for every task
    agent = (1 - 2 * q) ** 2 * p * (1 - p) / k
    return float(np.sum(judge) / np.sum(agent + judge))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--rescores", type=int, default=3)
    args = parser.parse_args()
    n, k, r = args.tasks, args.trials, args.rescores
    z = stats.norm.ppf(1 - ALPHA)
    print(
        f"{n} tasks × {k} trials × {r} re-scores, null candidates, α = {ALPHA}, {args.replicates} replicates"
    )
    header = f"{'mix':<16} {'judge share est':>15} {'truth':>6}  {'FA sign-flip':>12} {'FA z, with':>10} {'FA z, without':>13}  advice"
    print(header)
    for name, spread, q in MIXES:
        rng = np.random.default_rng(11)
        p = np.clip(0.5 + rng.uniform(-spread, spread, size=n), 0.0, 1.0)
        shares, accepts = [], {"sign": 0, "with": 0, "without": 0}
        advice = 0
        for rep in range(args.replicates):
            cand, best = arm(rng, p, k, r, q), arm(rng, p, k, r, q)
            m_c, m_b = cand.mean(axis=2), best.mean(axis=2)  # tasks × k rewards, as recorded
            d = m_c.mean(axis=1) - m_b.mean(axis=1)
            judge = np.array([arm_within(cand[t])[0] + arm_within(best[t])[0] for t in range(n)])
            within = np.array([arm_within(cand[t])[1] + arm_within(best[t])[1] for t in range(n)])
            result = split(d, judge, within, r)
            shares.append(result.judge_share)
            advice += rescores_pay_more(result)
            accepts["sign"] += sign_flip_test(m_c, m_b, alpha=ALPHA, seed=rep).p_value <= ALPHA
            accepts["with"] += d.mean() > z * np.sqrt(result.var_total)
            accepts["without"] += d.mean() > z * np.sqrt(max(result.var_agent, 1e-12))
        reps = args.replicates
        print(
            f"{name:<16} {np.median(shares):>15.3f} {truth(p, k, r, q):>6.3f}  "
            f"{accepts['sign'] / reps:>12.3f} {accepts['with'] / reps:>10.3f} {accepts['without'] / reps:>13.3f}  "
            f"re-scores pay more in {advice / reps:.0%}"
        )
    print("FA = false-accept rate of a null candidate; the gate's own test is the sign-flip one.")


if __name__ == "__main__":
    main()
