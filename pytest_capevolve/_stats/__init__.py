"""Pure estimators and tests on numpy arrays: no I/O, no pytest, no run dir.

The hypothesis strategies live in :mod:`.strategies` (install ``pytest-capevolve[hypothesis]``);
they are not imported here, so the statistics need no hypothesis. Each name below is imported from its
module at its first use, so a session that reads only :mod:`.core` loads nothing else.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOME = {
    "arms": (
        "ArmSummary", "integer_deltas_of", "paired_deltas", "paired_means", "sign_flip_test", "summarize",
    ),
    "core": (
        "as_matrix", "check_rewards", "combined_se", "coverage", "mean_se", "pass_at_k", "pass_hat_k",
        "task_means", "task_stderrs", "variance_components",
    ),
    "intervals": ("STUDENT_T", "detection_z", "t_ci"),
    "sign_flip": (
        "EXACT_MARGIN", "EXACT_MAX_SPAN", "SignFlipResult", "exact_mean", "exact_mean_delta",
        "exact_spread", "exact_task_deltas", "exceeds", "exceeds_k_se", "integer_deltas", "reward_grid",
        "sign_flip_on_integers",
    ),
}  # fmt: skip
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, from its module as ``sys.modules`` holds it now (never kept here: pytester's
    in-process sessions drop the modules a session imported, and a kept class would be another's)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
