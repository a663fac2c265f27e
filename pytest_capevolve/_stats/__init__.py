"""Pure estimators and tests on numpy arrays: no I/O, no pytest, no run dir.

The hypothesis strategies live in :mod:`.strategies` (install ``pytest-capevolve[hypothesis]``);
they are not imported here, so the statistics need no hypothesis.
"""

from .arms import ArmSummary, integer_deltas_of, paired_deltas, paired_means, sign_flip_test, summarize
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
from .intervals import (
    BCA,
    NORMAL,
    STUDENT_T,
    T_CI_MAX_TASKS,
    bootstrap_ci,
    ci_method,
    detection_z,
    mean_ci,
    mean_ci_method,
    t_ci,
)
from .sign_flip import (
    EXACT_MARGIN,
    EXACT_MAX_SPAN,
    SignFlipResult,
    exact_mean,
    exact_mean_delta,
    exact_spread,
    exact_task_deltas,
    exceeds,
    exceeds_k_se,
    integer_deltas,
    reward_grid,
    sign_flip_on_integers,
)

__all__ = [
    "ArmSummary", "BCA", "EXACT_MARGIN", "EXACT_MAX_SPAN", "NORMAL", "STUDENT_T", "SignFlipResult",
    "T_CI_MAX_TASKS", "as_matrix", "bootstrap_ci", "ci_method", "detection_z", "check_rewards",
    "combined_se", "coverage", "exact_mean", "exact_mean_delta", "exact_spread", "exact_task_deltas",
    "exceeds_k_se", "exceeds", "integer_deltas", "integer_deltas_of", "mean_ci", "mean_ci_method",
    "mean_se", "paired_deltas", "paired_means", "pass_at_k", "pass_hat_k",
    "reward_grid", "sign_flip_on_integers", "sign_flip_test", "summarize",
    "t_ci", "task_means", "task_stderrs", "variance_components",
]  # fmt: skip
