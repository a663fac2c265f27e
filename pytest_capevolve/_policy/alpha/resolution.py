"""Say the resolution before paying: the smallest win the next decision can accept on this val.

At the level the gate session would use, the smallest win is exact: "improve ≥ k of n tasks with none
worse". Pure."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from typing import Any, TypedDict

from ..._decide import alpha_budget
from ..._decide.alpha_budget import look_alpha
from ..._decide.verdict import Verdict
from ..._project.spec import Spec
from ..._stats.sign_flip import smallest_win


class Resolution(TypedDict):
    level: float
    level_exact: str
    how: str
    siblings: int
    val_tasks: int
    smallest_win: int | None  # tasks to improve with none worse; None: unreachable
    reachable: bool
    sentence: str
    min_effect: MinEffectReach


class MinEffectReach(TypedDict):
    min_effect: float
    most_tasks: int  # the most tasks an edit of that Δ̄ can improve (one trial in T each)
    passes_next: bool  # at the next decision's level
    passed_first: bool  # at the run's first decision's level (the val size alone)
    decisions_supported: int | None  # None: every decision (constant)
    tasks_needed: int | None  # the val size at which it would pass at the next level
    sentence: str


SUPPORT_CAP = 1000  # decisions counted ahead; past it "every decision" in effect


def next_level(
    spec: Spec, events: list[dict[str, Any]], siblings: int = 1, decided: int | None = None
) -> tuple[Fraction, str]:
    if decided is None:  # the run's decisions so far
        decided = alpha_budget.decisions_so_far(events)
    accepts = alpha_budget.accepted_decisions(events)
    discarded = alpha_budget.discarded_decisions(events)
    family = alpha_budget.round_alpha(
        spec.gate_alpha_schedule, spec.gate_alpha, decided, siblings, accepts, discarded
    )
    how = [f"gate_alpha_schedule {spec.gate_alpha_schedule}, decision {decided + 1}"]
    if discarded:
        how.append(f"{len(discarded)} earlier decision(s) with Δ̄ < 0 discarded")
    level = family
    if siblings > 1:
        level = family / siblings
        how.append(f"Holm's first step over {siblings} siblings (α/{siblings})")
    if spec.grow_max_looks > 1:
        level = look_alpha(level, 1, spec.grow_max_looks)
        how.append(f"the first of {spec.grow_max_looks} looks (half of it)")
    return level, "; ".join(how)


def most_tasks(min_effect: float, n_val: int, trials: int) -> int:
    """The most val tasks an edit of mean effect ``min_effect`` can improve with none worse: at most
    ⌊min_effect·n·T⌋ (each gains ≥ 1/T), on the decimal as written."""
    exact = Fraction(str(min_effect)) * n_val * max(trials, 1)
    return min(n_val, int(exact))


def min_effect_reach(
    spec: Spec, events: list[dict[str, Any]], n_val: int, siblings: int = 1
) -> MinEffectReach:
    """Whether an edit of ``gate_min_effect`` can still pass at the next decision, and for how many more."""
    effect = spec.gate_min_effect
    k = most_tasks(effect, n_val, spec.num_trials)
    decided = alpha_budget.decisions_so_far(events)

    def passes(level: Fraction) -> bool:
        need = smallest_win(level, n_val) if n_val > 0 else None
        return need is not None and need <= k

    level, _ = next_level(spec, events, siblings, decided)
    now = passes(level)
    first = passes(next_level(spec, [], siblings, 0)[0])
    supported: int | None
    if spec.gate_alpha_schedule == "constant":
        supported = None if now else 0
    else:  # the first decision ahead whose level no such edit passes
        ahead = (
            n for n in range(SUPPORT_CAP) if not passes(next_level(spec, events, siblings, decided + n)[0])
        )
        supported = next(ahead, SUPPORT_CAP)
    need = smallest_win(level, 200)  # the tasks to improve, whatever the val size (2^-200: never)
    tasks_needed = None
    if need is not None and effect > 0:  # ⌊effect·n·T⌋ ≥ need, on the decimal as written
        per_task = Fraction(str(effect)) * max(spec.num_trials, 1)
        tasks_needed = max(need, math.ceil(need / per_task))
    count = "every decision" if supported is None else f"{supported} more decision(s)"
    if spec.gate_alpha_schedule in alpha_budget.DISCARDING and supported is not None:
        count += " that count (one with Δ̄ < 0 is discarded: it spends nothing)"
    if now:
        sentence = (
            f"an edit of Δ̄ = gate_min_effect {effect:+g} improves at most {k} of {n_val} val tasks "
            f"(one trial in {spec.num_trials} each); this val supports {count} at which that can pass"
        )
    else:
        sentence = (
            f"no edit of Δ̄ = gate_min_effect {effect:+g} can pass at the next decision's level "
            f"(α = {float(level):.4g}): it improves at most {k} of {n_val} val tasks (one trial in "
            f"{spec.num_trials} each), and that level needs ≥ {need if need is not None else 'more than'} "
            f"improved with none worse"
            + (f"; a val of ≥ {tasks_needed} tasks (a new run) would let it pass" if tasks_needed else "")
            + ", or larger edits"
        )
    return {
        "min_effect": effect,
        "most_tasks": k,
        "passes_next": now,
        "passed_first": first,
        "decisions_supported": supported,
        "tasks_needed": tasks_needed,
        "sentence": sentence,
    }


def resolution(spec: Spec, events: list[dict[str, Any]], n_val: int, siblings: int = 1) -> Resolution:
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
        "min_effect": min_effect_reach(spec, events, n_val, siblings),
    }


def out_of_reach(verdict: Verdict) -> Verdict:
    """``verdict`` (an exact-gate reject) with a note when it improved fewer tasks than its level's
    smallest win: more trials would not help; aim wider."""
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


FLOOR_MEAN = 0.05  # a best this low fails (nearly) everything: check the harness before optimizing


def headroom(task_means: list[float], smallest: int | None) -> dict[str, Any]:
    """The best's headroom on val: ``saturated`` when fewer tasks are below perfect than the smallest win
    (add harder tasks), ``floor`` when it fails nearly every task (check the harness), else ``ok``."""
    valid = [m for m in task_means if m == m]
    below = sum(1 for m in valid if m < 1)
    mean = sum(valid) / len(valid) if valid else None
    if mean is not None and mean <= FLOOR_MEAN:
        verdict = "floor"
        reason = (
            f"the best's val mean is {mean:.3f}: it fails (nearly) every val task, so check the adapter "
            "and scorer (capevolve check, capevolve diagnose) before paying for a loop"
        )
    elif smallest is None or below < smallest:
        verdict = "saturated"
        need = "no win at all" if smallest is None else f"≥ {smallest} improved"
        reason = (
            f"only {below} of {len(valid)} val tasks are below a perfect score, and the next decision "
            f"needs {need}: no candidate can be accepted; add harder val tasks (a new run)"
        )
    else:
        verdict = "ok"
        reason = (
            f"{below} of {len(valid)} val tasks are below a perfect score; the next decision needs "
            f"≥ {smallest}"
        )
    return {"verdict": verdict, "tasks_below_perfect": below, "val_tasks": len(valid), "reason": reason}
