"""The run's one honest table: seed vs best on val, train and test, with its refusals stated.

Controller side or the ``capevolve`` command; reads persisted rollouts and the seal, pays
nothing. The numbers come from :mod:`stats`; this module decides what may be said about them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import stats


def paired_summary(candidate: np.ndarray, base: np.ndarray, *, seed: int) -> dict[str, Any] | None:
    """Mean paired delta candidate − base with its SE, 95% bootstrap CI and one-sided
    sign-flip p; None when no task is valid on both sides."""
    deltas, _ = stats.paired_deltas(candidate, base)
    if deltas.size == 0:
        return None
    mean, se = stats.mean_se(deltas)
    ci = stats.bootstrap_ci(deltas, seed=seed)
    test = stats.sign_flip_test(candidate, base, seed=seed)
    return {
        "n": int(deltas.size),
        "mean": mean,
        "se": se,
        "ci": None if ci is None else [ci[0], ci[1]],
        "p_one_sided": test.p_value,
    }
