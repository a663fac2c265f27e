"""How much of val the run has used up: the α budget's state and the calibration alarm.

The MDE (80 % power) at the next decision's α says when ``gate_min_effect`` is out of reach. Pure."""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path
from typing import Any, TypedDict

from ..._decide import alpha_budget
from ..._decide.calibration import Calibration, calibration
from ..._project.spec import Spec
from ..._project.way_on import commit_command
from ..._stats.sign_flip import NOT_ESTIMABLE
from ..._store.log.event_kinds import DECISION, GATE_DECISION, NULL_GATED

POWER = 0.8
# a gate's decision, as commit books it: the decision, then its flags (each its own word, or pasted it
# was the one --decision 'reject --reject-basis gate', which commit refuses)
BOOK = {"accept": ("accept",), "reject": ("reject", "--reject-basis", "gate")}


class ValReuse(TypedDict):
    schedule: str
    alpha: float
    decisions: int
    next_alpha: float
    val_tasks: int
    delta_sd: float | None
    mde: float | None
    target_effect: float
    detectable: bool | None
    refresh_val: bool
    advice: str
    any_false_accept_bound: float
    unbooked: dict[str, str]  # tag → the gate's decision, for a gate decision no booking followed
    book: str | None  # the command that books the first of them
    source: str


def delta_spread(events: list[dict[str, Any]], verdicts: dict[str, dict[str, Any]]) -> float | None:
    """The SD of per-task deltas, SE·√n, from the newest verdict gated on val (a null's serves as well)."""
    gated = [e for e in events if e.get("kind") in (GATE_DECISION, NULL_GATED)]
    # null controls first: their deltas are pure noise, which is what the MDE is about
    for event in sorted(reversed(gated), key=lambda e: e.get("kind") != NULL_GATED):
        verdict = verdicts.get(str(event.get("tag")), {})
        if verdict.get("se") is not None and int(verdict.get("n_tasks") or 0) > 1:
            return float(verdict["se"]) * math.sqrt(int(verdict["n_tasks"]))
    return None


def val_reuse(
    spec: Spec,
    events: list[dict[str, Any]],
    verdicts: dict[str, dict[str, Any]],
    n_val: int,
    booking: Collection[str] = (),  # tags booked right after (a session under commit auto): not unbooked
    # the run whose events these are, so the printed commit books into it; None only where there is
    # no run (events made up by a unit test): the commit then names none
    run_id: str | None = None,
) -> ValReuse:
    decided = alpha_budget.decisions_so_far(events)
    waiting = {t: d for t, d in unbooked(events).items() if t not in booking}
    accepts = alpha_budget.accepted_decisions(events)
    discarded = alpha_budget.discarded_decisions(events)  # addis: Δ̄ < 0 spent nothing
    next_alpha = float(
        alpha_budget.alpha_for(spec.gate_alpha_schedule, spec.gate_alpha, decided + 1, accepts, discarded)
    )
    spread = delta_spread(events, verdicts)
    identical = spread == 0.0  # a reproducible agent: no noise to scale an MDE by, never "+0.000"
    mde = None if spread is None or identical else alpha_budget.mde(next_alpha, n_val, spread, POWER)
    target = spec.gate_min_effect
    first = None if spread is None or identical else alpha_budget.mde(spec.gate_alpha, n_val, spread, POWER)
    detectable = None if mde is None else mde <= target
    # "no longer": the budget, not the val size, is what put the target out of reach
    exhausted_by_reuse = detectable is False and first is not None and first <= target
    if exhausted_by_reuse:
        advice = (
            f"refresh val or stop: the next decision gets α = {next_alpha:.3g}, at which {n_val} val "
            f"tasks detect only effects ≥ {mde:+.3f} (80% power), above the target gate_min_effect "
            f"{target:+g}; add new val tasks (a new run) or stop optimizing"
        )
    elif detectable is False:
        advice = (
            f"{n_val} val tasks detect only effects ≥ {mde:+.3f} even at α = {next_alpha:.3g}, above the "
            f"target gate_min_effect {target:+g}: a larger val split (a new run) would be needed to see it"
        )
    elif detectable:
        advice = (
            f"the target {target:+g} is still detectable at the next α ({next_alpha:.3g}): MDE {mde:+.3f}"
        )
    elif identical:
        advice = NOT_ESTIMABLE
    else:
        advice = "MDE unknown until a first verdict measures the spread of per-task deltas"
    if spec.gate_margin and mde is not None:  # the MDE is the superiority test's, not the margin's
        advice = (
            f"{advice} (for the question 'better'; this run asks 'no worse than "
            f"{spec.gate_margin:g}', whose betting test needs more tasks: docs: the gate, margins)"
        )
    return {
        "schedule": spec.gate_alpha_schedule,
        "alpha": spec.gate_alpha,
        "decisions": decided,
        "next_alpha": next_alpha,
        "val_tasks": n_val,
        "delta_sd": spread,
        "mde": mde,
        "target_effect": target,
        "detectable": detectable,
        "refresh_val": exhausted_by_reuse,
        "advice": advice,
        "any_false_accept_bound": alpha_budget.any_false_accept_bound(
            spec.gate_alpha_schedule, spec.gate_alpha, decided
        ),
        "unbooked": waiting,
        "book": next((_book(t, d, spec.project_dir, run_id) for t, d in waiting.items()), None),
        "source": "events.jsonl (gate_decision and decision lines), verdicts/*.json (se, n_tasks)",
    }


def _book(tag: str, decision: str, project_dir: Path | None, run_id: str | None) -> str:
    decided, *flags = BOOK.get(decision, ("…",))
    return commit_command(tag, decided, project_dir, run_id, *flags)


def unbooked(events: list[dict[str, Any]]) -> dict[str, str]:
    """The tags a gate decided on val (α spent) that no booking followed (``--capevolve-commit none``)."""
    waiting: dict[str, str] = {}
    for event in events:
        if event.get("kind") == GATE_DECISION:
            waiting[str(event.get("tag"))] = str(event.get("decision"))
        elif event.get("kind") == DECISION:
            waiting.pop(str(event.get("tag")), None)
    return waiting


def decisions_said(v: ValReuse) -> str:
    """ "val reuse (constant): 1 gate decision(s) on val so far, 1 decided but not booked: `capevolve
    commit …` books it; the next gets α …": a gate spends α whether or not its decision is booked."""
    said = f"val reuse ({v['schedule']}): {v['decisions']} gate decision(s) on val so far"
    if waiting := v["unbooked"]:
        named = f" ({', '.join(list(waiting)[:3])})" if len(waiting) > 1 else ""
        said += f", {len(waiting)} decided but not booked{named}: `{v['book']}` books {next(iter(waiting))!r}"
    return f"{said}; the next gets α = {v['next_alpha']:.3g}"


def run_calibration(spec: Spec, events: list[dict[str, Any]]) -> Calibration:
    return calibration(events, spec.gate_alpha)
