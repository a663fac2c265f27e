"""What the run has spent, what the next round would cost, and whether to go on.

``capevolve spend`` prints :func:`spend_report` before an optimizer proposes siblings; it pays and writes
nothing. A stop it recommends first reminds of accepted siblings not merged yet (two that fixed disjoint
val tasks leave the best with only the later edit)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from itertools import combinations
from pathlib import Path
from typing import Any

from ... import _stats as stats
from ..._decide.screen import ledger as screen_ledger
from ..._decide.screen import ledger_line
from ..._project.candidate import SEED_TAG
from ..._project.spec import Spec
from ..._project.way_on import pasteable
from ..._show.numbers import num
from ..._store.log.event_kinds import DECISION, ROLLOUT, SCREEN, TASK_EVAL, WORK_CREATED
from ..._store.readers.evidence import ByTag, index_records, reward_matrix, val_paid_by_tag
from ..._store.rundir import RunDir, rollouts_of
from .. import guards
from ..alpha.gate_settings import next_decision_spec
from ..alpha.resolution import headroom, resolution
from ..stop import stop_condition as sc
from ..stop.afford import Affordability, Ceilings, afford, missing_rollouts, money
from . import val_budget
from .optimizer_spend import unbooked_usd

NARROW_AT = 0.8  # share of a ceiling spent from which the loop should stop fanning out
DEFAULT_NULLS = 2  # the gate's default number of null controls


def _ceiling(used: float, limit: float | None, counts: str) -> dict[str, Any]:
    fraction = None if limit is None else (1.0 if limit == 0 else used / limit)
    reached = limit is not None and used >= limit
    return {"used": used, "limit": limit, "fraction": fraction, "reached": reached, "counts": counts}


def spend_report(
    spec: Spec, rundir: RunDir, *, n_siblings: int = 1, nulls: int = DEFAULT_NULLS, loop: bool = False
) -> dict[str, Any]:
    """The ``capevolve spend`` object (docs/how-to/run-the-loop.md lists its keys). ``loop``: the run is
    handed to a loop, whose gates take its schedule unless the spec names one."""
    state = rundir.state.read_state()
    events = rundir.log.events()
    val_ids = list((rundir.splits() or {}).get("val", []))
    trials = spec.num_trials
    records = index_records(rundir.rollouts.indexed_rollouts("val")) if val_ids else {}
    best = str(state.get("best_id", SEED_TAG))
    best_json = _best_json(records, best, val_ids, trials)

    decisions = [e for e in events if e.get("kind") == DECISION]
    booked = state.get("spent", {})  # older or partial state: the decisions' own lines, else nothing spent
    optimizer = {
        key: float(booked[key] or 0)
        if key in booked
        else float(sum(float(d.get(key) or 0) for d in decisions))
        for key in ("optimizer_usd", "optimizer_tokens", "optimizer_seconds")
    }
    per_decision = optimizer["optimizer_usd"] / len(decisions) if decisions else None
    # a hill-climb round's proposer already paid, its decision still to come: spent all the same
    optimizer["optimizer_usd"] += unbooked_usd(rundir)
    spent = _spent_json(state, events, len(decisions), optimizer)
    rollouts, runner_usd = int(state["spent"]["metric_calls"]), float(state["spent"]["usd"])
    iterations, stall = int(state.get("iterations", 0)), int(state.get("stall", 0))

    condition = sc.parse(spec.stop_condition)
    ceilings = Ceilings.from_spec(spec, condition)
    plain = Ceilings.from_spec(spec)  # the spec's own, without the stop condition's
    ceiling_json = {
        "max_metric_calls": _ceiling(spent["rollouts"], plain.max_metric_calls, "rollouts paid"),
        "max_usd": _ceiling(spent["total_usd"] or 0.0, plain.max_usd, "USD: runner + optimizer"),
        "max_iterations": _ceiling(spent["iterations"], plain.max_iterations, "decisions booked"),
        "stall": _ceiling(spent["stall"], plain.stall, "rejects in a row"),
    }

    null_tags = [f"{best}-null{i}" for i in range(1, nulls + 1)]
    needed = {
        "siblings": n_siblings * len(val_ids) * trials,
        "null_controls": missing_rollouts(records, null_tags, val_ids, trials),
        "best": missing_rollouts(records, [best], val_ids, trials),
    }

    def fits(n: int) -> Affordability:
        total = n * len(val_ids) * trials + needed["null_controls"] + needed["best"]
        return afford(
            total,
            rollouts_spent=rollouts,
            runner_usd_spent=runner_usd,
            ceilings=ceilings,
            optimizer_usd_spent=optimizer["optimizer_usd"],
            decisions_needed=n,
            iterations=iterations,
            stall=stall,
            optimizer_usd_per_decision=per_decision,
        )

    can = fits(n_siblings)
    afford_json = {
        "n_siblings": n_siblings,
        "rollouts": {**needed, "total": can.rollouts_needed},
        "null_tags": null_tags,
        **can.to_json(),
    }
    if per_decision is not None:
        afford_json["optimizer_usd_per_decision"] = money(per_decision)

    constraints = _constraints(spec, condition, records, best_json, spent, val_ids, trials)
    exhausted = [name for name, c in ceiling_json.items() if c["reached"]]
    exhausted += [
        f"stop_condition {p['kind']} ({p['clause']!r})"
        for p in constraints["predicates"]
        if p["role"] == "cap" and p["met"]
    ]
    recommendation = _recommend(exhausted, ceiling_json, constraints, can, fits(1) if n_siblings > 1 else can)
    unmerged = unmerged_siblings(events, spec.project_dir)
    if recommendation["action"] == "stop":
        recommendation["reason"] += merge_reminder(unmerged)
    # the α schedule and level the run's next decision is taken at: frozen at its first decision
    # (a loop's schedule unless the spec names one), not the spec file's default
    decided = next_decision_spec(spec, rundir, loop=loop)
    reuse = val_budget.val_reuse(
        decided, events, rundir.verdicts.verdicts(), len(val_ids), run_id=rundir.run_id
    )
    alarm = val_budget.run_calibration(decided, events)
    reach = resolution(decided, events, len(val_ids), n_siblings)
    best_means = stats.task_means(reward_matrix(records.get(best, {}), val_ids, trials)).tolist()
    return {
        "resolution": reach,
        "headroom": headroom(best_means, reach["smallest_win"]),
        "val_reuse": reuse,
        "calibration": alarm,
        "run_id": rundir.run_id,
        "run_dir": str(rundir.root),
        "best": best_json,
        "spent": spent,
        "ceilings": ceiling_json,
        "budget_exhausted": bool(exhausted),
        "afford": afford_json,
        "constraints": constraints,
        "recommendation": _overridden(recommendation, rundir, reuse, alarm, reach),
        "merge_before_stop": unmerged,
        "screens": screen_ledger(
            (e for e in events if e.get("kind") == SCREEN), val_paid_by_tag(rundir, events)
        ),
    }


def _best_json(records: ByTag, best: str, val_ids: list[str], trials: int) -> dict[str, Any]:
    matrix = reward_matrix(records.get(best, {}), val_ids, trials)
    mean, se = stats.mean_se(stats.task_means(matrix))
    coverage = stats.coverage(matrix)
    return {
        "tag": best,
        "val_mean": mean,
        "se": se,
        "coverage": coverage,
        "tasks": len(val_ids),
        "trials": trials,
        "full_val": bool(val_ids) and coverage == 1.0,
        "source": rollouts_of("val", best),
    }


def _spent_json(
    state: dict[str, Any], events: list[dict[str, Any]], decisions: int, optimizer: dict[str, float]
) -> dict[str, Any]:
    by_split = Counter(str(e.get("split")) for e in events if e.get("kind") == ROLLOUT)
    task_evals = [e for e in events if e.get("kind") == TASK_EVAL]  # capevolve eval-task: never evidence
    rollouts = int(state["spent"]["metric_calls"])
    runner_usd = float(state["spent"]["usd"])
    total_usd = runner_usd + optimizer["optimizer_usd"]
    first_ts = next((float(e["ts"]) for e in events if "ts" in e), None)
    wall = None if first_ts is None else max(0.0, time.time() - first_ts)
    return {
        "rollouts": rollouts,
        "rollouts_by_split": dict(by_split),
        "task_evals": {
            "rollouts": sum(int(e.get("rollouts") or 0) for e in task_evals),
            "usd": money(sum(float(e.get("cost_usd") or 0.0) for e in task_evals)),
        },
        "runner_usd": money(runner_usd),
        "runner_usd_per_rollout": money(runner_usd / rollouts) if rollouts else None,
        "runner_spend_metered": None if rollouts == 0 else runner_usd > 0,
        **optimizer,
        "optimizer_usd": money(optimizer["optimizer_usd"]),
        "total_usd": money(total_usd),
        "decisions": decisions,
        "iterations": int(state.get("iterations", 0)),
        "stall": int(state.get("stall", 0)),
        "wall_clock_seconds": None if wall is None else round(wall, 3),
        "first_event_ts": first_ts,
        "source": "state.json (spent, iterations, stall), events.jsonl (rollout, decision lines)",
    }


def _constraints(
    spec: Spec,
    condition: sc.StopCondition,
    records: ByTag,
    best_json: dict[str, Any],
    spent: dict[str, Any],
    val_ids: list[str],
    trials: int,
) -> dict[str, Any]:
    actuals = sc.Actuals(
        val_mean=best_json["val_mean"],
        val_full=best_json["full_val"],
        usd=spent["total_usd"] or 0.0,
        seconds=spent["wall_clock_seconds"] or 0.0,
        rollouts=spent["rollouts"],
        iterations=spent["iterations"],
        stall=spent["stall"],
        task_means=_guard_means(condition, records, best_json["tag"], val_ids, trials),
        val_task_ids=tuple(val_ids),
    )
    return {
        "stop_condition": spec.stop_condition,
        "predicates": sc.evaluate(condition, actuals),
        "ambiguous": [asdict(a) for a in condition.ambiguous],
    }


def _overridden(
    recommendation: dict[str, str],
    rundir: RunDir,
    reuse: Mapping[str, Any],
    alarm: Mapping[str, Any],
    reach: Mapping[str, Any],
) -> dict[str, str]:
    """The budget's recommendation, overridden by a worn-out val, an unreachable level or a finalized run."""
    if reuse["refresh_val"] and recommendation["action"] != "stop":
        recommendation = {"action": "refresh_val", "reason": reuse["advice"] + "."}
    out_of_reach = _out_of_reach(reach)
    if out_of_reach and recommendation["action"] != "stop":
        recommendation = {"action": "stop", "reason": out_of_reach}
    if alarm["alarm"]:
        recommendation = {**recommendation, "reason": f"{recommendation['reason']} {alarm['text']}."}
    finalized = guards.finalized_said(rundir)
    if finalized is not None:  # whatever the budget says, no gate can run here again
        way_on = pasteable(guards.FINALIZED.way_on_at(guards.Checkpoint.SPEND), rundir.project_dir)
        recommendation = {"action": "stop", "reason": f"{finalized}; {way_on}."}
    return recommendation


def _out_of_reach(reach: Mapping[str, Any]) -> str | None:
    """Why no round can pass at the next level, or None: no candidate can (even every task improved), or
    the α spent put ``gate_min_effect`` out of reach where the first decision could pass it."""
    if not reach["reachable"]:
        return f"stop: {reach['sentence']}."
    effect = reach["min_effect"]
    if effect["passed_first"] and not effect["passes_next"]:
        return (
            f"stop: {effect['sentence']}; the α the run's decisions spent put it out of reach (its "
            "first decision could pass it), so another round pays for a gate that cannot accept it."
        )
    return None


def _guard_means(
    condition: sc.StopCondition, records: ByTag, best: str, val_ids: list[str], trials: int
) -> dict[str, tuple[float | None, float | None]]:
    def mean(tag: str, task: str) -> float | None:
        value = stats.task_means(reward_matrix(records.get(tag, {}), [task], trials))[0]
        return None if value != value else float(value)  # nan: no valid trial

    return {
        p.task: (mean(best, p.task), mean(SEED_TAG, p.task))
        for p in condition.predicates
        if p.kind == sc.NO_REGRESS and p.task is not None and p.task in val_ids
    }


def _guard_suffix(constraints: dict[str, Any]) -> str:
    guards = [p for p in constraints["predicates"] if p["role"] == "guard" and not p["met"]]
    suffix = ""
    for state, noted in (("not holding", False), ("unmeasured", True)):  # a note: no data to measure it
        if tasks := [f"task {p['task']}" for p in guards if ("note" in p) == noted]:
            suffix += f" Guard(s) {state}: {', '.join(tasks)}."
    if constraints["ambiguous"]:
        suffix += (
            f" {len(constraints['ambiguous'])} clause(s) of the stop condition could not be read "
            "(constraints.ambiguous): they are not checked."
        )
    return suffix


def _near_limits(ceilings: dict[str, dict[str, Any]], constraints: dict[str, Any]) -> list[str]:
    near = [
        f"{name} {c['fraction']:.0%} spent"
        for name, c in ceilings.items()
        if c["fraction"] is not None and c["fraction"] >= NARROW_AT
    ]
    near += [
        f"stop_condition {p['kind']} {float(p['actual']) / float(p['number']):.0%} spent"
        for p in constraints["predicates"]
        if p["role"] == "cap" and p["number"] and float(p["actual"]) / float(p["number"]) >= NARROW_AT
    ]
    return near


def _recommend(
    exhausted: list[str],
    ceilings: dict[str, dict[str, Any]],
    constraints: dict[str, Any],
    can: Affordability,
    one: Affordability,
) -> dict[str, str]:
    suffix = _guard_suffix(constraints)

    def say(action: str, reason: str) -> dict[str, str]:
        return {"action": action, "reason": reason + suffix}

    met_goals = [p for p in constraints["predicates"] if p["role"] == "goal" and p["met"]]
    spent = [name for name in exhausted if name != "stall" and not name.startswith("stop_condition stall")]
    if spent:
        return say("stop", f"budget exhausted: {', '.join(spent)}.")
    if exhausted:  # a stall is a plateau, not money or rollouts spent: said with its rule
        stall = ceilings["stall"]
        rule = f"spec stall={stall['limit']:g}" if stall["reached"] else exhausted[0]
        return say(
            "stop",
            f"stalled: {stall['used']:g} rejects in a row reached the stall rule ({rule}: "
            "stop after that many rejects without an accept).",
        )
    if met_goals:
        goal = met_goals[0]
        return say(
            "stop", f"goal met on full val: {goal['clause']!r} (best's val mean {goal['actual']:.4f})."
        )
    if one.affordable is False:
        names = ", ".join(b["ceiling"] for b in one.blockers)
        return say("stop", f"not even one more sibling fits: it would cross {names}.")
    if near := _near_limits(ceilings, constraints):
        return say(
            "narrow_scope",
            f"{'; '.join(near)} and the goal is unmet: propose one cheap candidate, no fan-out.",
        )
    if can.affordable is False:
        names = ", ".join(b["ceiling"] for b in can.blockers)
        return say("narrow_scope", f"the requested siblings would cross {names}, one would not: propose one.")
    return say("continue", f"no ceiling within {NARROW_AT:.0%} and no goal met.")


def render_table(report: dict[str, Any]) -> list[str]:
    b, s, a = report["best"], report["spent"], report["afford"]
    lines = [
        f"capevolve spend — run {report['run_id']}",
        f"best {b['tag']!r}: val mean {num(b['val_mean'], '.4f')} (SE {num(b['se'], '.4f')}), "
        f"coverage {b['coverage']:.0%} of {b['tasks']} tasks × {b['trials']} trials",
        f"spent: {s['rollouts']} rollouts, runner ${s['runner_usd']:.4f}"
        + ("" if s["runner_spend_metered"] is not False else " (UNMETERED: $0 reported)")
        + f", optimizer ${s['optimizer_usd']:.4f} / {s['optimizer_tokens']:.0f} tokens / "
        f"{s['optimizer_seconds']:.0f} s, {s['iterations']} iterations, stall {s['stall']}, "
        f"wall clock {num(s['wall_clock_seconds'], '.0f')} s",
        "",
        f"{'ceiling':<18}{'used':>12}{'limit':>12}{'share':>8}",
    ]
    for name, c in report["ceilings"].items():
        used = f"{c['used']:.4f}" if isinstance(c["used"], float) and name == "max_usd" else str(c["used"])
        share = "—" if c["fraction"] is None else f"{c['fraction']:.0%}"
        lines.append(f"{name:<18}{used:>12}{num(c['limit'], 'g'):>12}{share:>8}")
    lines.append("")
    affordable = a["affordable"] if isinstance(a["affordable"], str) else ("yes" if a["affordable"] else "NO")
    lines.append(
        f"{a['n_siblings']} sibling(s): {a['rollouts']['total']} rollouts "
        f"({a['rollouts']['siblings']} siblings + {a['rollouts']['null_controls']} nulls + "
        f"{a['rollouts']['best']} best), ${num(a['usd_needed'], '.4f')} → affordable: {affordable}"
    )
    lines += [f"  blocked by {x['ceiling']}: {x['message']}" for x in a["blockers"]]
    lines += [f"  note: {n}" for n in a["notes"]]
    for p in report["constraints"]["predicates"]:
        met = "MET" if p["met"] else "unmet"
        lines.append(f"stop condition {p['clause']!r}: {met} (actual {_plain_number(p['actual'])})")
    for amb in report["constraints"]["ambiguous"]:
        lines.append(f"stop condition {amb['clause']!r}: AMBIGUOUS — {amb['reason']}")
    v = report["val_reuse"]
    lines.append(
        f"{val_budget.decisions_said(v)}; MDE at that α with {v['val_tasks']} tasks: {num(v['mde'], '+.3f')} "
        f"(target {v['target_effect']:+g})"
    )
    lines += [
        f"  {v['advice']}",
        f"resolution: {report['resolution']['sentence']}",
        *([f"schedule: {report['schedule']}"] if report.get("schedule") else []),
        report["calibration"]["text"],
    ]
    screens = report.get("screens") or {}
    if screens.get("screens"):
        lines.append(ledger_line(screens))
    r = report["recommendation"]
    lines += ["", f"recommendation: {r['action']} — {r['reason']}"]
    return lines


def _plain_number(value: Any) -> Any:
    return f"{value:.6g}" if isinstance(value, float) else value


def unmerged_siblings(events: Iterable[Mapping[str, Any]], project: Path) -> list[dict[str, Any]]:
    """Pairs of accepted siblings with disjoint ``fixed`` tasks that no merge combines yet, oldest first,
    each with the command that merges them in ``project``."""
    where = pasteable(" --project PROJECT", project)
    accepted: dict[str, list[Mapping[str, Any]]] = {}
    merged: list[set[str]] = []
    for event in events:
        kind = event.get("kind")
        if kind == DECISION and event.get("decision") == "accept":
            accepted.setdefault(str(event.get("parent")), []).append(event)
        elif kind == WORK_CREATED and event.get("merged_from"):
            merged.append({str(t) for t in event["merged_from"]})
    out = []
    for parent, siblings in accepted.items():
        for a, b in combinations(siblings, 2):
            fixed_a, fixed_b = set(a.get("fixed") or []), set(b.get("fixed") or [])
            tag_a, tag_b = str(a["tag"]), str(b["tag"])
            if not fixed_a or not fixed_b or fixed_a & fixed_b or any({tag_a, tag_b} <= m for m in merged):
                continue
            fixed = {tag_a: sorted(fixed_a), tag_b: sorted(fixed_b)}
            command = f"capevolve merge {tag_a} {tag_b} --tag {tag_a}_{tag_b}{where}"
            out.append({"tags": [tag_a, tag_b], "parent": parent, "fixed": fixed, "command": command})
    return out


def merge_reminder(pairs: list[dict[str, Any]]) -> str:
    if not pairs:
        return ""
    named = "; ".join(f"{' and '.join(p['tags'])} (from {p['parent']!r}): {p['command']}" for p in pairs)
    return (
        f" Before the stop, merge the accepted siblings that fixed disjoint tasks (the best holds only "
        f"the later edit), then gate the merge: {named}."
    )
