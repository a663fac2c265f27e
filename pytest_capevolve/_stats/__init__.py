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
from .intervals import STUDENT_T, detection_z, t_ci
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
    "ArmSummary", "EXACT_MARGIN", "EXACT_MAX_SPAN", "STUDENT_T", "SignFlipResult",
    "as_matrix", "detection_z", "check_rewards",
    "combined_se", "coverage", "exact_mean", "exact_mean_delta", "exact_spread", "exact_task_deltas",
    "exceeds_k_se", "exceeds", "integer_deltas", "integer_deltas_of",
    "mean_se", "paired_deltas", "paired_means", "pass_at_k", "pass_hat_k",
    "reward_grid", "sign_flip_on_integers", "sign_flip_test", "summarize",
    "t_ci", "task_means", "task_stderrs", "variance_components",
]  # fmt: skip
