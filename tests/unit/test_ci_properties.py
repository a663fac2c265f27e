"""The verdict's interval: the numpy BCa is scipy's BCa, and the analytic interval used past
ANALYTIC_CI_MIN_TASKS tasks agrees with the bootstrap it replaces."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide import gate


def reference_bootstrap_ci(
    deltas: np.ndarray, *, confidence: float = 0.95, seed: int = 0, n_resamples: int = 2000
) -> tuple[float, float] | None:
    """The BCa interval straight from :func:`scipy.stats.bootstrap` (slow: the reference)."""
    from scipy import stats as sps

    deltas = np.asarray(deltas, dtype=float)
    if deltas.size < 2:
        return None
    if np.all(deltas == deltas[0]):
        return (float(deltas[0]), float(deltas[0]))
    for method in ("BCa", "percentile"):
        result = sps.bootstrap(
            (deltas,),
            np.mean,
            confidence_level=confidence,
            n_resamples=n_resamples,
            method=method,
            rng=np.random.default_rng(seed),
        )
        low, high = result.confidence_interval
        if not (np.isnan(low) or np.isnan(high)):
            break
    return float(low), float(high)


def reference(deltas: np.ndarray, **kwargs) -> tuple[float, float] | None:
    with warnings.catch_warnings():  # scipy warns when BCa is undefined (it falls back, as we do)
        warnings.simplefilter("ignore")
        return reference_bootstrap_ci(deltas, **kwargs)


# per-task deltas on a rubric grid (mostly ties, as real rewards are) or anywhere in [-1, 1]
grid_deltas = st.lists(
    st.sampled_from([-1.0, -0.5, -0.25, 0.0, 0.0, 0.25, 0.5, 1.0]), min_size=2, max_size=300
)
real_deltas = st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=300)


@settings(max_examples=80)
@given(st.one_of(grid_deltas, real_deltas), st.integers(0, 2**20), st.sampled_from([0.8, 0.9, 0.95]))
@example([0.0, 3.167404825668395e-228], 0, 0.95)  # the acceleration underflows to 0/0: percentile
def test_the_vectorized_bca_interval_is_scipys(deltas, seed, confidence) -> None:
    values = np.array(deltas)
    ours = stats.bootstrap_ci(values, seed=seed, confidence=confidence)
    theirs = reference(values, seed=seed, confidence=confidence)
    assert ours is not None and theirs is not None
    assert ours == pytest.approx(theirs, abs=1e-9)
    assert stats.ci_method(values.size) == stats.BCA


@settings(max_examples=6)
@given(st.integers(0, 2**20), st.floats(0.05, 0.95), st.sampled_from([2001, 3000]))
def test_the_analytic_interval_for_many_tasks_agrees_with_the_bootstrap(seed, rate, n) -> None:
    """Past the threshold the bootstrap's bounds sit within its own Monte Carlo error (plus the
    skew it would have caught) of Δ̄ ± z·SE: a fraction of an SE."""
    rng = np.random.default_rng(seed)
    deltas = (rng.random(n) < rate).astype(float) - (rng.random(n) < 0.5).astype(float) * 0.5
    low, high = stats.bootstrap_ci(deltas, seed=seed)
    ref = reference(deltas, seed=seed)
    assert ref is not None
    se = float(np.std(deltas, ddof=1) / np.sqrt(n))
    assert stats.ci_method(n) == stats.NORMAL
    assert abs(low - ref[0]) < 0.35 * se and abs(high - ref[1]) < 0.35 * se
    assert low < float(np.mean(deltas)) < high


def test_the_verdict_says_which_interval_it_carries() -> None:
    rng = np.random.default_rng(0)
    config = gate.GateConfig()
    for tasks, method in ((12, "t"), (300, "bca_bootstrap"), (2500, "normal")):
        best = (rng.random((tasks, 3)) < 0.5).astype(float)
        cand = (rng.random((tasks, 3)) < 0.6).astype(float)
        verdict = gate.decide(
            cand, best, tag="c", against="seed", task_ids=[f"t{i}" for i in range(tasks)], config=config
        )
        assert verdict.ci_method == method and verdict.ci is not None
        assert verdict.to_dict()["ci_method"] == method


@pytest.mark.parametrize(("n", "resamples"), [(600, 2000), (1999, 2000)])
def test_the_bootstrap_means_are_those_of_one_whole_int64_draw(n: int, resamples: int) -> None:
    """The resamples are drawn a block of rows at a time — held as uint16 for the next candidate
    up to 1,000 tasks (a quarter of int64's bytes), drawn again past it (never 32 MB held to a
    session's end at 2,000 tasks) — and their means are those of scipy's one int64 draw."""
    from pytest_capevolve._stats import intervals

    whole = np.random.default_rng(5).integers(0, n, (resamples, n))
    deltas = np.random.default_rng(1).normal(size=n)
    means = intervals._resampled_means(deltas, resamples, 5)
    assert np.array_equal(means, np.mean(deltas[whole], axis=-1))
    matrix = intervals._resampling_matrix(n, resamples, 5)
    assert matrix.dtype == np.uint16 and not matrix.flags.writeable and np.array_equal(matrix, whole)
