"""The trials-first designs of ``benchmarks/cost_per_decision.py`` (issue 40): one trial on every
val task, a look, the next trial only while undecided. Their rows are only worth printing if each
holds its level: the null law its looks and its joint last look use is checked against the package's
exact sign-flip test, the joint p against a flip-by-flip replay of the design through that test,
and the whole designs' false-accept rate on simulated τ² nulls.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_capevolve._stats.sign_flip import sign_flip_on_integers, sign_flips

from .test_cost_bound import bench, load_benchmark

designs = load_benchmark("trials_first")

deltas = st.lists(st.integers(-3, 3), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(deltas)
def test_the_null_tail_is_the_exact_sign_flip_law(values):
    d = np.array(values, dtype=np.int64)
    tail = designs.null_tail(np.abs(d))
    span = int(np.abs(d).sum())
    assert tail.size == 2 * span + 1
    assert abs(tail[0] - 1.0) < 1e-12  # every pattern reaches the lowest sum
    assert abs(tail[int(d.sum()) + span] - sign_flip_on_integers(d).p_value) < 1e-12


def replayed_p(sums, levels, futility, n_resamples, seed):
    """The joint p by its definition, one flip at a time through the package's exact test."""
    observed, count = int(sums[:, -1].sum()), 0
    for signs in sign_flips(sums.shape[0], n_resamples, seed):
        for s in signs:
            x = s[:, None].astype(np.int64) * sums
            for k in range(sums.shape[1] - 1):
                if sign_flip_on_integers(x[:, k]).at_most(levels[k]):
                    count += 1  # T = ∞: an early look accepts this flip
                    break
                if futility and x[:, k].sum() <= 0:
                    break  # T = −∞
            else:
                count += int(x[:, -1].sum() >= observed)
    return Fraction(count + 1, n_resamples + 1)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-1, 1), st.integers(-1, 1), st.integers(-1, 1)), min_size=6, max_size=14)
)
def test_the_joint_p_is_the_flip_by_flip_replay_of_the_design(trials):
    sums = np.cumsum(np.array(trials, dtype=np.int64), axis=1)
    sums[:, 0] += 1 - (sums[:, 0] != 0)  # look 1 of every task non-zero: its early accepts are reachable
    for futility in (False, True):
        levels = designs.trial_levels(3)
        assert designs.joint_last_p(sums, levels, futility, 150, 3) == replayed_p(
            sums, levels, futility, 150, 3
        )


def test_trials_first_designs_hold_alpha_on_tau2_nulls():
    rng = np.random.default_rng(40)
    pool, n, draws = bench.real_rates(), 30, 1000
    rates = rng.choice(pool, size=(draws, n), replace=True)
    cand, best = ((rng.random((draws, n, 3)) < rates[..., None]).astype(float) for _ in range(2))
    arms = bench.Arms(cand, best, cand, best)
    bound = bench.ALPHA + 3 * np.sqrt(bench.ALPHA * (1 - bench.ALPHA) / draws)  # 0.071
    for name in ("t-1st joint", "t-1st j+fut"):
        accepted, paid = bench.PATHS[name](arms)
        assert accepted.mean() <= bound, (name, accepted.mean())
        assert set(np.unique(paid)) <= {n, 2 * n, 3 * n}  # whole trials on every task, looks at 1, 2, 3
