"""Climbing the screen ladder kills a byte-identical candidate at most ``screen_alpha`` of the
time over the whole climb (issue 39, item 1): tiers 1 → 2 → 3, each after a promote, the
candidate fresh rollouts of the best's own per-task rates (tau2-like, the public run in
tests/data). The rate's Wilson upper bound (scipy) must be ≤ screen_alpha; each tier at the full
level — the old rule, on the same draws — is measured beside it. ``benchmarks/screening.py``
prints the whole table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from pytest_capevolve._decide import screen as ladder

SCREEN_ALPHA = 0.05
DATA = Path(__file__).parents[1] / "data" / "tau2-airline-v4-val-per-task.json"


def tau2_rates() -> np.ndarray:
    data = json.loads(DATA.read_text())
    arms = ("seed", "c0_null5", "c0_null5b", "c0_null5c")
    return np.array([np.mean([r for a in arms for r in data[a][t]["trials"]]) for t in sorted(data["seed"])])


def climb_kills(n: int, trials: int, climbs: int, seed: int) -> tuple[int, int]:
    """(kills over the climb with the tiers' shares, kills with every tier at the full level)."""
    rng = np.random.default_rng(seed)
    pool = tau2_rates()
    ids = [f"t{i:03d}" for i in range(n)]
    split = full = 0
    for c in range(climbs):
        rates = rng.choice(pool, size=n)
        best = (rng.random((n, trials)) < rates[:, None]).astype(float)
        cand = (rng.random((n, trials)) < rates[:, None]).astype(float)  # the same bytes, re-run
        means = ladder.selection_means(best, ids, trials)
        order = ladder.ladder(means, f"run{c}", "cand")
        killed = {"split": False, "full": False}
        for tier in ladder.TIERS:
            rows = [ids.index(t) for t in order[: ladder.screen_size(n, tier)]]
            for rule, alpha in (("split", ladder.tier_alpha(SCREEN_ALPHA, tier)), ("full", SCREEN_ALPHA)):
                if not killed[rule]:
                    result = ladder.decide_screen(cand[rows], best[rows], alpha=alpha, num_trials=trials)
                    killed[rule] = result.decision == ladder.KILL
        split += killed["split"]
        full += killed["full"]
    return split, full


@pytest.mark.parametrize(("n", "trials"), [(24, 3), (50, 5), (100, 5)])
def test_the_whole_climb_kills_a_byte_identical_candidate_at_most_screen_alpha(n, trials):
    # 600 climbs hold the bound (Wilson upper 0.6 %, 3.0 %, 4.5 %) and still fail the old rule,
    # every tier at the full level, on the same draws (7.0 % at 50 x 5 and 100 x 5: upper 9.3 %
    # each); 1,200 climbs said the same at twice the CPU (full 6.0 %, 6.25 %; shares 0.25 %,
    # 1.4 %, 2.4 %)
    climbs = 600
    split, full = climb_kills(n, trials, climbs, seed=2026 + n)
    upper = binomtest(split, climbs).proportion_ci(confidence_level=0.95, method="wilson").high
    assert upper <= SCREEN_ALPHA, (split, full)
    assert split <= full  # the shares can only kill less, on the same draws


def test_the_tier_shares_sum_to_screen_alpha():
    from fractions import Fraction

    shares = [ladder.tier_alpha(SCREEN_ALPHA, tier) for tier in ladder.TIERS]
    assert shares == [Fraction(1, 40), Fraction(1, 80), Fraction(1, 80)] and sum(shares) == Fraction(1, 20)
