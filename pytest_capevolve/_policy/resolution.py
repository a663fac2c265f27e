"""Say the resolution before paying: the smallest win the next decision can accept on this val.

Read by ``capevolve spend``, ``plan`` and ``baseline`` (through :func:`.spend.spend_report`).
The next decision's level is the one the gate session would use: the α the run's schedule
gives it (:mod:`.._decide.alpha_budget`), its share at Holm's first step when ``siblings``
are gated together (α/k: the strictest a sibling may face), and the first look's share when
the spec allows growth (:mod:`.._decide.looks`). The smallest win at that level is exact
(:func:`.._stats.resolution.smallest_win`): "improve ≥ k of n tasks with none worse". When
even all n would not do, the round is told it cannot accept anything. Pure: spec, events and
sizes in, plain data out.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any, TypedDict

from .._decide import alpha_budget
from .._decide.looks import look_alpha
from .._decide.verdict import Verdict
from .._project.spec import Spec
from .._stats.resolution import smallest_win


class Resolution(TypedDict):
    """What ``spend``/``plan`` print under ``resolution``."""

    level: float
    level_exact: str
    how: str
    siblings: int
    val_tasks: int
    smallest_win: int | None  # tasks to improve with none worse; None: unreachable
    reachable: bool
    sentence: str


def next_level(spec: Spec, events: list[dict[str, Any]], siblings: int = 1) -> tuple[Fraction, str]:
    """The level the next decision on val is taken at, exactly, and how it came to be."""
    decided = alpha_budget.decisions_so_far(events)
    family = alpha_budget.round_alpha(spec.gate_alpha_schedule, spec.gate_alpha, decided, siblings)
    how = [f"gate_alpha_schedule {spec.gate_alpha_schedule}, decision {decided + 1}"]
    level = family
    if siblings > 1:
        level = family / siblings
        how.append(f"Holm's first step over {siblings} siblings (α/{siblings})")
    if spec.grow_max_looks > 1:
        level = look_alpha(level, 1, spec.grow_max_looks)
        how.append(f"the first of {spec.grow_max_looks} looks (half of it)")
    return level, "; ".join(how)


def resolution(spec: Spec, events: list[dict[str, Any]], n_val: int, siblings: int = 1) -> Resolution:
    """The smallest win the gate can accept at the next decision's level on ``n_val`` tasks."""
    level, how = next_level(spec, events, max(siblings, 1))
    k = smallest_win(level, n_val) if n_val > 0 else None
    if k is not None:
        sentence = (
            f"the smallest win the gate can accept at the next decision's level (α = {float(level):.4g}: "
            f"{how}) on these {n_val} val tasks: improve ≥ {k} of {n_val} tasks with none worse"
        )
    else:
        sentence = (
            f"no candidate can be accepted at the next decision's level (α = {float(level):.4g}: {how}) "
            f"on these {n_val} val tasks: even improving all {n_val} with none worse gives p = "
            f"1/2^{n_val} > α; add val tasks (a new run), or gate fewer siblings together"
        )
    return {
        "level": float(level),
        "level_exact": str(level),
        "how": how,
        "siblings": max(siblings, 1),
        "val_tasks": n_val,
        "smallest_win": k,
        "reachable": k is not None,
        "sentence": sentence,
    }


def out_of_reach(verdict: Verdict) -> Verdict:
    """``verdict`` (a round's exact-gate reject) with a note when it improved fewer tasks than
    the smallest win its own level can accept: no edit that small can pass on this val, so
    more trials of it would not help either; said so the next proposal aims wider."""
    if verdict.mode != "exact" or verdict.decision != "reject" or not verdict.n_tasks:
        return verdict
    family = verdict.details.get("family") or {}
    exact = family.get("level_exact")
    level = Fraction(str(exact)) if exact else Fraction(str(verdict.alpha)) if verdict.alpha else None
    if level is None:
        return verdict
    improved = sum(1 for row in verdict.per_task.values() if (row.get("delta") or 0) > 0)
    k = smallest_win(level, verdict.n_tasks)
    if k is not None and improved >= k:
        return verdict
    need = f"the {k} (with none worse) its level α = {float(level):.4g} can accept" if k else "any"
    note = f"it improves {improved} of {verdict.n_tasks} tasks, fewer than {need}: out of reach on this val"
    return replace(
        verdict,
        reason=f"{verdict.reason}; {note}",
        details={**verdict.details, "resolution": {"improved": improved, "smallest_win": k}},
    )
