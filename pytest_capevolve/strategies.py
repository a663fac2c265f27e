"""Hypothesis strategies for property-testing gates (ours or your own).

Install with ``pip install 'pytest-capevolve[hypothesis]'``. Usage::

    from hypothesis import given
    from pytest_capevolve.strategies import null_arms, planted_effect_arms

    @given(null_arms())
    def test_my_gate_never_accepts_both_directions(arms):
        candidate, best = arms
        assert not (my_gate(candidate, best) == my_gate(best, candidate) == "accept")

Every strategy yields numpy reward matrices (tasks × trials, values in [0, 1], nan = missing),
drawn through hypothesis so a failing case shrinks. They favour edge cases: use them for
properties that hold on *every* input, not to estimate an error rate
(``benchmarks/gate_calibration.py``)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

GRIDS = (1, 2, 4, 5, 10)

# One uniform draw per trial: a trial succeeds when its draw is below the task's rate, so a
# rate of 0 never succeeds and a rate of 1 always does (the draw is < 1).
_UNIT = st.floats(min_value=0.0, max_value=1.0, exclude_max=True, allow_nan=False)


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
    """A tasks × trials matrix of rewards on a grid (binary when grid = 1); with ``missing``,
    any trial may be nan (an infra error: missing data)."""
    k = draw(st.integers(min_trials, max_trials))
    g = grid if grid is not None else draw(st.sampled_from(GRIDS))
    trial = st.integers(0, g).map(lambda step: step / g)
    if missing:
        trial = st.one_of(trial, st.just(float("nan")))
    rows = draw(st.lists(st.lists(trial, min_size=k, max_size=k), min_size=min_tasks, max_size=max_tasks))
    return np.array(rows, dtype=float).reshape(len(rows), k)


@st.composite
def task_rates(draw: st.DrawFn, *, min_tasks: int = 2, max_tasks: int = 40) -> np.ndarray:
    """Per-task success probabilities spread like a real agent's: some 0, some 1, many between."""
    rate = st.one_of(st.just(0.0), st.just(1.0), st.floats(0.05, 0.95))
    return np.array(draw(st.lists(rate, min_size=min_tasks, max_size=max_tasks)), dtype=float)


def _arm(draw: st.DrawFn, rates: np.ndarray, trials: int) -> np.ndarray:
    """Binary rewards, tasks × trials: trial j of task t passes when its draw is < rates[t]."""
    rows = [draw(st.lists(_UNIT, min_size=trials, max_size=trials)) for _ in range(rates.size)]
    uniforms = np.array(rows, dtype=float).reshape(rates.size, trials)
    return (uniforms < rates[:, None]).astype(float)


@st.composite
def null_arms(draw: st.DrawFn, *, trials: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Two arms drawn from the same per-task rates: a byte-identical copy and its original."""
    rates = draw(task_rates())
    return _arm(draw, rates, trials), _arm(draw, rates, trials)


@st.composite
def planted_effect_arms(
    draw: st.DrawFn, *, effect: float = 0.3, trials: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """(candidate, best) where the candidate's rate is higher by ``effect`` on every task (capped at 1)."""
    rates = draw(task_rates(min_tasks=20))
    better = np.clip(rates + effect, 0.0, 1.0)
    return _arm(draw, better, trials), _arm(draw, rates, trials)
