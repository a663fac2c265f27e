"""Pure estimators and tests on numpy arrays: no I/O, no pytest, no run dir.

The hypothesis strategies live in :mod:`.strategies` (install ``pytest-capevolve[hypothesis]``);
they are not imported here, so the statistics need no hypothesis.
"""

from .core import (
    ANALYTIC_CI_MIN_TASKS,
    BCA,
    EXACT_MARGIN,
    GRID_MAX,
    NORMAL,
    SignFlipResult,
    as_matrix,
    bootstrap_ci,
    check_rewards,
    ci_method,
    combined_se,
    coverage,
    integer_deltas,
    mean_se,
    normal_ci,
    paired_deltas,
    pass_at_k,
    pass_hat_k,
    reference_bootstrap_ci,
    reward_grid,
    sign_flip_test,
    task_means,
    task_stderrs,
    variance_components,
)

__all__ = [
    "ANALYTIC_CI_MIN_TASKS",
    "BCA",
    "EXACT_MARGIN",
    "GRID_MAX",
    "NORMAL",
    "SignFlipResult",
    "as_matrix",
    "bootstrap_ci",
    "ci_method",
    "check_rewards",
    "combined_se",
    "coverage",
    "integer_deltas",
    "mean_se",
    "normal_ci",
    "paired_deltas",
    "pass_at_k",
    "pass_hat_k",
    "reference_bootstrap_ci",
    "reward_grid",
    "sign_flip_test",
    "task_means",
    "task_stderrs",
    "variance_components",
]
