"""Hypothesis strategies for property-testing gates (ours or your own).

Usage::

    from hypothesis import given
    from pytest_capevolve.stats.strategies import null_arms, planted_effect_arms

    @given(null_arms())
    def test_my_gate_rejects_byte_identical_copies(arms):
        candidate, best = arms
        assert my_gate(candidate, best) != "accept"   # (in distribution: see calibration)

Every strategy yields numpy reward matrices (tasks × trials, values in [0, 1], nan = missing).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

GRIDS = (1, 2, 4, 5, 10)


@st.composite
def reward_matrices(
    draw: st.DrawFn,
    *,
    min_tasks: int = 1,
    max_tasks: int = 30,
    min_trials: int = 1,
    max_trials: int = 6,
    grid: int | None = None,
    missing: bool = False,
) -> np.ndarray:
    """A tasks × trials matrix of rewards on a grid (binary when grid = 1)."""
    n = draw(st.integers(min_tasks, max_tasks))
    k = draw(st.integers(min_trials, max_trials))
    g = grid if grid is not None else draw(st.sampled_from(GRIDS))
    cells = draw(st.lists(st.integers(0, g), min_size=n * k, max_size=n * k))
    matrix = np.array(cells, dtype=float).reshape(n, k) / g
    if missing:
        holes = draw(st.lists(st.booleans(), min_size=n * k, max_size=n * k))
        matrix[np.array(holes).reshape(n, k)] = np.nan
    return matrix


@st.composite
def task_rates(draw: st.DrawFn, *, min_tasks: int = 2, max_tasks: int = 40) -> np.ndarray:
    """Per-task success probabilities spread like a real agent's: some 0, some 1, many between."""
    n = draw(st.integers(min_tasks, max_tasks))
    kinds = draw(st.lists(st.sampled_from(["never", "always", "mid"]), min_size=n, max_size=n))
    mids = draw(st.lists(st.floats(0.05, 0.95), min_size=n, max_size=n))
    return np.array(
        [0.0 if k == "never" else 1.0 if k == "always" else m for k, m in zip(kinds, mids, strict=True)]
    )


@st.composite
def null_arms(draw: st.DrawFn, *, trials: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Two arms drawn from the same per-task rates: a byte-identical copy and its original."""
    rates = draw(task_rates())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)

    def arm() -> np.ndarray:
        return (rng.random((rates.size, trials)) < rates[:, None]).astype(float)

    return arm(), arm()


@st.composite
def planted_effect_arms(
    draw: st.DrawFn, *, effect: float = 0.3, trials: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """(candidate, best) where the candidate's rate is higher by ``effect`` on every task."""
    rates = draw(task_rates(min_tasks=20))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    better = np.clip(rates + effect, 0.0, 1.0)
    candidate = (rng.random((rates.size, trials)) < better[:, None]).astype(float)
    best = (rng.random((rates.size, trials)) < rates[:, None]).astype(float)
    return candidate, best
