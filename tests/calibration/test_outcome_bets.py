"""The (a, b)-bet sequential design of ``benchmarks/outcome_bets.py`` (issue 40), a proposal, not the
gate: its rows in ``cost_per_decision.py`` are only worth printing if it holds its level. Checked
here: every bet is fair when the arms are exchangeable (each factor's mean over the two orders of a
pair is exactly 1, what Ville's inequality needs), the joint swap p at the end of val against an
enumeration of every swap, and the whole design's false-accept rate on simulated τ² nulls.
"""

from __future__ import annotations

import itertools

import numpy as np

from .test_cost_bound import bench, load_benchmark

design = load_benchmark("outcome_bets")
STEPS = design.design_steps(bench.synthetic_rates(np.random.default_rng(2026)), 0.10, 3)


def test_every_bet_is_fair_under_exchangeable_arms():
    factors = np.exp(STEPS)
    assert np.allclose((factors + factors.T) / 2, 1.0)
    assert np.allclose(np.diag(STEPS), 0.0)  # a tie (a = b) bets nothing
    assert (factors > 0).all()


def test_the_swap_p_is_the_share_of_all_swaps_replayed():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 4, 10), rng.integers(0, 4, 10)
    a[:4] = b[:4] + 1  # some early lead, so crossings and ties are both reachable
    a = np.minimum(a, 3)
    high, low = np.log(20), -2.5
    keep, swap = STEPS[a, b], STEPS[b, a]
    observed, count = keep.sum(), 0
    for pattern in itertools.product((False, True), repeat=a.size):
        path = np.cumsum(np.where(pattern, swap, keep))
        code, _ = design._stops(path[None, :], low, high)
        count += int(code[0] == 1 or (code[0] == 0 and path[-1] >= observed - 1e-9))
    exact = count / 2**a.size
    p = design.swap_p(STEPS, a, b, low, 0)
    assert abs(p - exact) <= 3 * np.sqrt(exact * (1 - exact) / design.RESAMPLES) + 1 / design.RESAMPLES, (
        p,
        exact,
    )


def test_the_outcome_bet_design_holds_alpha_on_tau2_nulls():
    rng = np.random.default_rng(40)
    pool, n, draws = bench.real_rates(), 55, 3000
    rates = rng.choice(pool, size=(draws, n), replace=True)
    cand, best = ((rng.random((draws, n, 3)) < rates[..., None]).astype(float) for _ in range(2))
    accepted, paid = design.outcome_bets(STEPS, -2.5)(bench.Arms(cand, best, cand, best))
    bound = bench.ALPHA + 3 * np.sqrt(bench.ALPHA * (1 - bench.ALPHA) / draws)  # 0.062
    assert accepted.mean() <= bound, accepted.mean()
    assert paid.max() <= 3 * n and paid.mean() < 3 * n  # it stops early, never pays past val
