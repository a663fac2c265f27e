"""Pure estimators and tests on numpy arrays: no I/O, no pytest, no run dir.

The hypothesis strategies live in :mod:`.strategies` (install ``pytest-capevolve[hypothesis]``);
they are not imported here, so the statistics need no hypothesis.
"""

from .core import (
    EXACT_MARGIN,
    GRID_MAX,
    SignFlipResult,
    as_matrix,
    bootstrap_ci,
    check_rewards,
    combined_se,
    coverage,
    integer_deltas,
    mean_se,
    paired_deltas,
    pass_at_k,
    pass_hat_k,
    reward_grid,
    sign_flip_test,
    task_means,
    task_stderrs,
    variance_components,
)

__all__ = [
    "EXACT_MARGIN",
    "GRID_MAX",
    "SignFlipResult",
    "as_matrix",
    "bootstrap_ci",
    "check_rewards",
    "combined_se",
    "coverage",
    "integer_deltas",
    "mean_se",
    "paired_deltas",
    "pass_at_k",
    "pass_hat_k",
    "reward_grid",
    "sign_flip_test",
    "task_means",
    "task_stderrs",
    "variance_components",
]
