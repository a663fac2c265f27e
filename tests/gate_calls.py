"""The gate called as the unit tests call it: arrays in (one trial when 1-D), tasks t0…tN, the
exact mode at α 0.05 with no coverage floor. Shared by the gate, verdict and round tests."""

from __future__ import annotations

import numpy as np

from pytest_capevolve._decide import gate
from pytest_capevolve._decide.verdict import GateConfig, Verdict

EXACT = GateConfig(mode="exact", alpha=0.05, min_coverage=0.0)


def decide(candidate, best, config=EXACT, **kw) -> Verdict:
    candidate, best = np.asarray(candidate, float), np.asarray(best, float)
    if candidate.ndim == 1:
        candidate, best = candidate[:, None], best[:, None]
    ids = [f"t{i}" for i in range(len(candidate))]
    return gate.decide(candidate, best, tag="cand", against="best", task_ids=ids, config=config, **kw)
