"""The margin test's false accepts at the margin's boundary (issue 41): per-task rates for the
baseline and exactly δ lower for the candidate (true mean delta = δ), per-task means over k
binary trials, a grid of cells; each measured rate is compared with α within 3 binomial SE of
the draws. The naive shift test fails the first cell (benchmarks/compare_margin.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_capevolve._stats.margin import p_above, p_below

ALPHA = 0.05
DRAWS = 400
SLACK = 3 * (ALPHA * (1 - ALPHA) / DRAWS) ** 0.5
CELLS = [  # tasks, trials, margin, the baseline's per-task rates
    (12, 1, -0.05, (0.05, 0.5, 0.95)),
    (12, 5, -0.05, (0.05, 0.5, 0.95)),
    (30, 3, -0.02, (0.02, 0.5, 0.98)),
    (60, 2, -0.1, (0.1, 0.3, 0.9)),
    (200, 3, -0.05, (0.05, 0.5, 0.95)),
    (200, 1, -0.2, (0.2, 0.6, 1.0)),
]


def boundary_deltas(
    rng: np.random.Generator, tasks: int, trials: int, margin: float, rates: tuple[float, ...]
) -> np.ndarray:
    base = rng.choice(rates, size=tasks)
    a = (rng.random((tasks, trials)) < base[:, None]).mean(axis=1)
    b = (rng.random((tasks, trials)) < (base + margin)[:, None]).mean(axis=1)
    return b - a


@pytest.mark.parametrize(("tasks", "trials", "margin", "rates"), CELLS)
def test_non_inferiority_false_accepts_at_most_alpha(
    tasks: int, trials: int, margin: float, rates: tuple[float, ...]
) -> None:
    rng = np.random.default_rng(tasks * 1000 + trials)
    hits = sum(
        p_above(boundary_deltas(rng, tasks, trials, margin, rates), margin) <= ALPHA for _ in range(DRAWS)
    )
    assert hits / DRAWS <= ALPHA + SLACK


@pytest.mark.parametrize("bound", [0.05, 0.1])
def test_equivalence_false_accepts_at_most_alpha_on_either_edge(bound: float) -> None:
    """TOST at ±m: a candidate exactly m better (the upper edge) is not called equivalent."""
    rng = np.random.default_rng(7)
    rates = (0.1, 0.5, 0.85)
    hits = 0
    for _ in range(DRAWS):
        d = -boundary_deltas(rng, 100, 3, -bound, rates)  # true mean delta +m
        hits += max(p_above(d, -bound), p_below(d, bound)) <= ALPHA
    assert hits / DRAWS <= ALPHA + SLACK
