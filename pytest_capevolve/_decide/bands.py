"""A task's band from its passes: ``defect`` (0 of n), ``unstable`` (0 < k < n), ``solid``
(n of n), ``missing`` (no valid trial). One rule, read by ``capevolve diagnose`` (a tag's
tasks) and ``capevolve compare`` (how each task moved between two runs)."""

from __future__ import annotations

DEFECT, UNSTABLE, SOLID, MISSING = "defect", "unstable", "solid", "missing"


def band_of(passes: int, trials: int) -> str:
    """The band of a task that passed ``passes`` of its ``trials`` valid trials."""
    if trials == 0:
        return MISSING
    if passes == 0:
        return DEFECT
    return SOLID if passes == trials else UNSTABLE
