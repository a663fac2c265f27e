"""Pure estimators and tests on numpy arrays: no I/O, no pytest, no run dir.

The hypothesis strategies live in :mod:`.strategies` (install ``pytest-capevolve[hypothesis]``);
they are not imported here, so the statistics need no hypothesis.
"""

from .arms import (
    ArmSummary,
    integer_deltas_of,
    paired_means,
    paired_sign_flip,
    summarize,
)
from .core import (
    as_matrix,
    check_rewards,
    combined_se,
    coverage,
    mean_se,
    pass_at_k,
    pass_hat_k,
    task_means,
    task_stderrs,
    variance_components,
)
from .exact_mean import exact_mean, exact_spread, exact_task_deltas, exceeds
from .intervals import (
    ANALYTIC_CI_MIN_TASKS,
    BCA,
    NORMAL,
    STUDENT_T,
    T_CI_MAX_TASKS,
    bootstrap_ci,
    ci_method,
    mean_ci,
    mean_ci_method,
    normal_ci,
    reference_bootstrap_ci,
    t_ci,
)
from .sign_flip import (
    EXACT_MARGIN,
    EXACT_MAX_SPAN,
    GRID_MAX,
    SignFlipResult,
    integer_deltas,
    paired_deltas,
    reward_grid,
    sign_flip_on_integers,
    sign_flip_test,
)

__all__ = [
    "ANALYTIC_CI_MIN_TASKS",
    "ArmSummary",
    "BCA",
    "EXACT_MARGIN",
    "EXACT_MAX_SPAN",
    "GRID_MAX",
    "NORMAL",
    "STUDENT_T",
    "SignFlipResult",
    "T_CI_MAX_TASKS",
    "as_matrix",
    "bootstrap_ci",
    "ci_method",
    "check_rewards",
    "combined_se",
    "coverage",
    "exact_mean",
    "exact_spread",
    "exact_task_deltas",
    "exceeds",
    "integer_deltas",
    "integer_deltas_of",
    "mean_ci",
    "mean_ci_method",
    "mean_se",
    "normal_ci",
    "paired_deltas",
    "paired_means",
    "paired_sign_flip",
    "pass_at_k",
    "pass_hat_k",
    "reference_bootstrap_ci",
    "reward_grid",
    "sign_flip_on_integers",
    "sign_flip_test",
    "summarize",
    "t_ci",
    "task_means",
    "task_stderrs",
    "variance_components",
]
