"""The JSON answers of the run policy, typed: what ``capevolve spend`` prints.

TypedDicts, so the printed JSON is the plain dict it always was (same keys, same order) while
mypy checks every key a caller reads. docs/how-to/run-the-loop.md lists what each key means;
the numbers are
computed in :mod:`.spend`, :mod:`.val_budget` and :mod:`.._decide.calibration`.
"""

from __future__ import annotations

from typing import Any, TypedDict

from .._decide.calibration import Calibration
from .val_budget import ValReuse


class BestArm(TypedDict):
    """The current best on val, as the spend report's ``best``."""

    tag: str
    val_mean: float | None
    se: float | None
    coverage: float
    tasks: int
    trials: int
    full_val: bool
    source: str


class Constraints(TypedDict):
    """The spec's stop condition, read against the run (``constraints``): each predicate with
    its actual value, and the clauses that could not be read."""

    stop_condition: str | None
    predicates: list[dict[str, Any]]
    ambiguous: list[dict[str, Any]]


class Recommendation(TypedDict):
    """What the optimizer should do next: ``action`` (continue, narrow_scope, refresh_val, stop)
    and the sentence that says why."""

    action: str
    reason: str


class SpendReport(TypedDict):
    """The ``capevolve spend`` object (:func:`.spend.spend_report`)."""

    val_reuse: ValReuse
    calibration: Calibration
    run_id: str
    run_dir: str
    best: BestArm
    spent: dict[str, Any]
    ceilings: dict[str, dict[str, Any]]
    budget_exhausted: bool
    afford: dict[str, Any]
    constraints: Constraints
    recommendation: Recommendation
    screens: dict[str, Any]
