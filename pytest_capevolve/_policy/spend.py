"""What the run has spent, what the next round would cost, and whether to go on.

``capevolve spend`` prints :func:`spend_report` before an optimizer proposes siblings: the best's
full-val numbers, everything spent (rollouts, runner $ measured from the rollouts, optimizer
$/tokens/seconds booked by ``commit``), every ceiling with used/limit, whether N siblings fit
(:func:`afford`), the stop condition's predicates against the measured actuals, and a
recommendation (stop / narrow_scope / continue) with its reason.

:func:`afford` is pure (counts, costs, ceilings in; an :class:`Affordability` out) so that a
session planner can refuse, before paying, a plan that would cross ``max_usd`` at the run's
measured $/rollout. Nothing here pays a rollout or writes the run dir.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import _stats as stats
from .._decide.screen import ledger as screen_ledger
from .._project.candidate import SEED_TAG
from .._project.spec import Spec
from .._store.evidence import ByTag, index_records, reward_matrix
from .._store.rundir import RunDir
from .._store.seal import Seal
from . import stop_condition as sc
from . import val_budget
from .answers import BestArm, Constraints, Recommendation, SpendReport

UNKNOWN = "unknown"
NARROW_AT = 0.8  # share of a ceiling spent from which the loop should stop fanning out
DEFAULT_NULLS = 2  # the gate's default number of null controls


# A stop condition's caps tighten the spec ceiling of the same quantity.
_CAP_CEILING = {
    sc.USD: "max_usd",
    sc.ROLLOUTS: "max_metric_calls",
    sc.ITERATIONS: "max_iterations",
    sc.STALL: "stall",
}


@dataclass(frozen=True)
class Ceilings:
    """Budget ceilings (None = no ceiling). ``sources`` names, per ceiling, where its limit
    came from when not the spec's own key (a stop condition's cap, say)."""

    max_metric_calls: float | None = None
    max_usd: float | None = None
    max_iterations: float | None = None
    stall: float | None = None
    sources: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_spec(cls, spec: Spec, condition: sc.StopCondition | None = None) -> Ceilings:
        """The spec's ceilings, each tightened by a stricter cap of the stop condition."""
        limits: dict[str, float | None] = {
            "max_metric_calls": spec.max_metric_calls,
            "max_usd": spec.max_usd,
            "max_iterations": spec.max_iterations,
            "stall": spec.stall,
        }
        sources: dict[str, str] = {}
        for p in condition.predicates if condition is not None else ():
            name = _CAP_CEILING.get(p.kind)
            if name is None or p.number is None:
                continue
            current = limits[name]
            if current is None or p.number < current:
                limits[name] = int(p.number) if name != "max_usd" and p.number.is_integer() else p.number
                sources[name] = f"stop_condition {p.clause!r}"
        return cls(**limits, sources=tuple(sorted(sources.items())))

    def source(self, name: str) -> str:
        return dict(self.sources).get(name, f"spec {name}")

    def named(self, name: str) -> str:
        """``max_usd=5`` as a message names it, with the stop condition's clause if it set it."""
        limit = getattr(self, name)
        where = dict(self.sources).get(name)
        return f"{name}={limit:g}" + (f" (from {where})" if where else "")


@dataclass(frozen=True)
class Affordability:
    """Whether ``rollouts_needed`` more rollouts (and ``decisions_needed`` decisions) fit.

    ``affordable`` is True, False (``blockers`` name each ceiling that would be crossed) or
    ``"unknown"``: no rollout measured yet (never a yes on no data), or a ``max_usd`` ceiling
    with unmetered rollouts (they cost $0: not free, just not reported)."""

    rollouts_needed: int
    usd_per_rollout: float | None
    usd_needed: float | None
    affordable: bool | str
    runner_spend_metered: bool | None
    blockers: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "rollouts_needed": self.rollouts_needed,
            "usd_per_rollout": money(self.usd_per_rollout),
            "usd_needed": money(self.usd_needed),
            "affordable": self.affordable,
            "runner_spend_metered": self.runner_spend_metered,
            "blockers": self.blockers,
            "notes": self.notes,
        }


def money(value: float | None) -> float | None:
    """Dollars as printed: rounded to a millionth, so float noise never reads as spend."""
    return None if value is None else round(float(value), 6)


def afford(
    rollouts_needed: int,
    *,
    rollouts_spent: int,
    runner_usd_spent: float,
    ceilings: Ceilings,
    optimizer_usd_spent: float = 0.0,
    decisions_needed: int = 0,
    iterations: int = 0,
    stall: int = 0,
    optimizer_usd_per_decision: float | None = None,
) -> Affordability:
    """Would ``rollouts_needed`` more rollouts, and ``decisions_needed`` more decisions, cross a
    ceiling? Pure; the $ projection uses this run's measured runner $/rollout
    (``runner_usd_spent / rollouts_spent``) plus, when known, the optimizer's $/decision.

    ``max_usd`` counts all money spent (runner + optimizer); ``max_metric_calls`` rollouts;
    ``max_iterations`` decisions booked; ``stall`` blocks once the run has stalled."""
    blockers: list[dict[str, Any]] = []
    notes: list[str] = []
    metered: bool | None = None
    rate: float | None = None
    if rollouts_spent > 0:
        rate = runner_usd_spent / rollouts_spent
        metered = runner_usd_spent > 0
        if not metered:
            notes.append(
                f"{rollouts_spent} rollouts cost $0: the adapter reports no cost_usd — unmetered, "
                "not free; cap the run with max_metric_calls"
            )
    else:
        notes.append("no rollout yet: the $ per rollout is not measured, so affordability is unknown")

    def block(name: str, used: Any, needed: Any, message: str) -> None:
        blockers.append(
            {
                "ceiling": name,
                "source": ceilings.source(name),
                "used": used,
                "needed": needed,
                "limit": getattr(ceilings, name),
                "message": f"{message} {ceilings.named(name)}",
            }
        )

    cap = ceilings.max_metric_calls
    if cap is not None and rollouts_spent + rollouts_needed > cap:
        block(
            "max_metric_calls",
            rollouts_spent,
            rollouts_needed,
            f"{rollouts_spent} + {rollouts_needed} rollouts >",
        )
    usd_needed: float | None = None
    if rate is not None:
        usd_needed = rollouts_needed * rate
        if optimizer_usd_per_decision is not None:
            usd_needed += decisions_needed * optimizer_usd_per_decision
    usd_spent = runner_usd_spent + optimizer_usd_spent
    if ceilings.max_usd is not None:
        over_now = usd_spent >= ceilings.max_usd and (rollouts_needed > 0 or decisions_needed > 0)
        over_after = usd_needed is not None and metered and usd_spent + usd_needed > ceilings.max_usd
        if over_now or over_after:
            projected = usd_spent + (usd_needed or 0.0)
            text = f"${usd_spent:.4f} spent + ${usd_needed or 0.0:.4f} needed = ${projected:.4f} >"
            block("max_usd", money(usd_spent), money(usd_needed), text)
    if ceilings.max_iterations is not None and iterations + decisions_needed > ceilings.max_iterations:
        block(
            "max_iterations", iterations, decisions_needed, f"{iterations} + {decisions_needed} decisions >"
        )
    if ceilings.stall is not None and stall >= ceilings.stall:
        block("stall", stall, 0, f"{stall} rejects in a row: the run has stalled,")

    affordable: bool | str
    if blockers:
        affordable = False
    elif rollouts_spent == 0:
        affordable = UNKNOWN
    elif ceilings.max_usd is not None and not metered:
        affordable = UNKNOWN
        notes.append("max_usd cannot be checked: the runner's spend is not metered")
    else:
        affordable = True
    return Affordability(rollouts_needed, rate, usd_needed, affordable, metered, blockers, notes)


def missing_rollouts(records: ByTag, tags: Iterable[str], task_ids: Sequence[str], num_trials: int) -> int:
    """Rollouts a session would still owe for ``tags`` on these tasks (an infra error is
    re-paid, so it counts as missing)."""
    missing = 0
    for tag in tags:
        arm = records.get(tag, {})
        for task_id in task_ids:
            for k in range(num_trials):
                record = arm.get((task_id, k))
                missing += record is None or record.infra_error is not None
    return missing


# -- the report ---------------------------------------------------------------------------------


def _optimizer_spend(state: dict[str, Any], decisions: list[dict[str, Any]]) -> dict[str, float]:
    spent = state.get("spent", {})
    out = {}
    for key in ("optimizer_usd", "optimizer_tokens", "optimizer_seconds"):
        if key in spent:
            out[key] = float(spent[key] or 0)
        else:  # older or partial state: the decisions' own lines, else nothing spent
            out[key] = float(sum(float(d.get(key) or 0) for d in decisions))
    return out


def _ceiling(used: float, limit: float | None, counts: str) -> dict[str, Any]:
    fraction = None if limit is None else (1.0 if limit == 0 else used / limit)
    reached = limit is not None and used >= limit
    return {"used": used, "limit": limit, "fraction": fraction, "reached": reached, "counts": counts}


def spend_report(
    spec: Spec,
    rundir: RunDir,
    *,
    n_siblings: int = 1,
    nulls: int = DEFAULT_NULLS,
    now: float | None = None,
) -> SpendReport:
    """The ``capevolve spend`` object for the run (see the README for its keys). Reads
    ``state.json``, ``events.jsonl``, ``splits.json`` and the val rollouts; pays nothing."""
    state = rundir.state.read_state()
    events = rundir.log.events()
    splits = rundir.splits() or {"train": [], "val": [], "test": []}
    val_ids = list(splits["val"])
    trials = spec.num_trials
    records = index_records(rundir.rollouts.indexed_rollouts("val")) if val_ids else {}
    best = str(state.get("best_id", SEED_TAG))

    matrix = reward_matrix(records.get(best, {}), val_ids, trials)
    means = stats.task_means(matrix)
    mean, se = stats.mean_se(means)
    coverage = stats.coverage(matrix)
    best_json: BestArm = {
        "tag": best,
        "val_mean": mean,
        "se": se,
        "coverage": coverage,
        "tasks": len(val_ids),
        "trials": trials,
        "full_val": bool(val_ids) and coverage == 1.0,
        "source": f"rollouts/val/*__{best}__t*.json",
    }

    decisions = [e for e in events if e.get("kind") == "decision"]
    optimizer = _optimizer_spend(state, decisions)
    by_split: dict[str, int] = {}
    for event in events:
        if event.get("kind") == "rollout":
            by_split[str(event.get("split"))] = by_split.get(str(event.get("split")), 0) + 1
    rollouts = int(state["spent"]["metric_calls"])
    runner_usd = float(state["spent"]["usd"])
    total_usd = runner_usd + optimizer["optimizer_usd"]
    iterations, stall = int(state.get("iterations", 0)), int(state.get("stall", 0))
    first_ts = next((float(e["ts"]) for e in events if "ts" in e), None)
    clock = time.time() if now is None else now
    wall = None if first_ts is None else max(0.0, clock - first_ts)
    metered = None if rollouts == 0 else runner_usd > 0
    spent = {
        "rollouts": rollouts,
        "rollouts_by_split": by_split,
        "runner_usd": money(runner_usd),
        "runner_usd_per_rollout": money(runner_usd / rollouts) if rollouts else None,
        "runner_spend_metered": metered,
        **optimizer,
        "optimizer_usd": money(optimizer["optimizer_usd"]),
        "total_usd": money(total_usd),
        "decisions": len(decisions),
        "iterations": iterations,
        "stall": stall,
        "wall_clock_seconds": None if wall is None else round(wall, 3),
        "first_event_ts": first_ts,
        "source": "state.json (spent, iterations, stall), events.jsonl (rollout, decision lines)",
    }

    condition = sc.parse(spec.stop_condition)
    ceilings = Ceilings.from_spec(spec, condition)
    spec_ceilings = Ceilings.from_spec(spec)
    ceiling_json = {
        "max_metric_calls": _ceiling(rollouts, spec_ceilings.max_metric_calls, "rollouts paid"),
        "max_usd": _ceiling(money(total_usd) or 0.0, spec_ceilings.max_usd, "USD: runner + optimizer"),
        "max_iterations": _ceiling(iterations, spec_ceilings.max_iterations, "decisions booked"),
        "stall": _ceiling(stall, spec_ceilings.stall, "rejects in a row"),
    }

    null_tags = [f"{best}-null{i}" for i in range(1, nulls + 1)]
    per_decision = optimizer["optimizer_usd"] / len(decisions) if decisions else None
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

    guard_means = _guard_means(condition, records, best, val_ids, trials)
    actuals = sc.Actuals(
        val_mean=mean,
        val_full=best_json["full_val"],
        usd=money(total_usd) or 0.0,
        seconds=round(wall or 0.0, 3),
        rollouts=rollouts,
        iterations=iterations,
        stall=stall,
        task_means=guard_means,
        val_task_ids=tuple(val_ids),
    )
    constraints: Constraints = {
        "stop_condition": spec.stop_condition,
        "predicates": sc.evaluate(condition, actuals),
        "ambiguous": [a.to_json() for a in condition.ambiguous],
    }
    exhausted = [name for name, c in ceiling_json.items() if c["reached"]]
    exhausted += [
        f"stop_condition {p['kind']} ({p['clause']!r})"
        for p in constraints["predicates"]
        if p["role"] == "cap" and p["met"]
    ]
    recommendation = _recommend(exhausted, ceiling_json, constraints, can, fits(1) if n_siblings > 1 else can)
    reuse = val_budget.val_reuse(spec, events, rundir.verdicts.verdicts(), len(val_ids))
    alarm = val_budget.run_calibration(spec, events)
    if reuse["refresh_val"] and recommendation["action"] != "stop":
        recommendation = {"action": "refresh_val", "reason": reuse["advice"] + "."}
    if alarm["alarm"]:
        recommendation = {**recommendation, "reason": f"{recommendation['reason']} {alarm['text']}."}
    if Seal(rundir).burned() is not None:  # whatever the budget says, no gate can run here again
        recommendation = {
            "action": "stop",
            "reason": f"run {rundir.run_id} is finalized: its test split was scored, so no gate runs "
            "in it again; start a new run (--capevolve-new-run) to go on.",
        }
    return {
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
        "recommendation": recommendation,
        "screens": screen_ledger(e for e in events if e.get("kind") == "screen"),
    }


def _guard_means(
    condition: sc.StopCondition, records: ByTag, best: str, val_ids: list[str], trials: int
) -> dict[str, tuple[float | None, float | None]]:
    out: dict[str, tuple[float | None, float | None]] = {}
    for p in condition.predicates:
        if p.kind != sc.NO_REGRESS or p.task is None or p.task not in val_ids:
            continue
        pair = []
        for tag in (best, SEED_TAG):
            value = stats.task_means(reward_matrix(records.get(tag, {}), [p.task], trials))[0]
            pair.append(None if value != value else float(value))  # nan: no valid trial
        out[p.task] = (pair[0], pair[1])
    return out


def _recommend(
    exhausted: list[str],
    ceilings: dict[str, dict[str, Any]],
    constraints: Constraints,
    can: Affordability,
    one: Affordability,
) -> Recommendation:
    goals = [p for p in constraints["predicates"] if p["role"] == "goal"]
    met_goals = [p for p in goals if p["met"]]
    guards = [p for p in constraints["predicates"] if p["role"] == "guard" and not p["met"]]
    broken = [p for p in guards if "note" not in p]
    unmeasured = [p for p in guards if "note" in p]
    suffix = ""
    if broken:
        suffix += " Guard(s) not holding: " + ", ".join(f"task {p['task']}" for p in broken) + "."
    if unmeasured:
        suffix += " Guard(s) unmeasured: " + ", ".join(f"task {p['task']}" for p in unmeasured) + "."
    if constraints["ambiguous"]:
        suffix += (
            f" {len(constraints['ambiguous'])} clause(s) of the stop condition could not be read "
            "(constraints.ambiguous): they are not checked."
        )
    if exhausted:
        return {"action": "stop", "reason": f"budget exhausted: {', '.join(exhausted)}.{suffix}"}
    if met_goals:
        goal = met_goals[0]
        return {
            "action": "stop",
            "reason": f"goal met on full val: {goal['clause']!r} "
            f"(best's val mean {goal['actual']:.4f}).{suffix}",
        }
    if one.affordable is False:
        names = ", ".join(b["ceiling"] for b in one.blockers)
        return {
            "action": "stop",
            "reason": f"not even one more sibling fits: it would cross {names}.{suffix}",
        }
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
    if near:
        return {
            "action": "narrow_scope",
            "reason": f"{'; '.join(near)} and the goal is unmet: propose one cheap candidate, "
            f"no fan-out.{suffix}",
        }
    if can.affordable is False:
        names = ", ".join(b["ceiling"] for b in can.blockers)
        return {
            "action": "narrow_scope",
            "reason": f"the requested siblings would cross {names}, one would not: propose one.{suffix}",
        }
    return {"action": "continue", "reason": f"no ceiling within {NARROW_AT:.0%} and no goal met.{suffix}"}


# -- the table ---------------------------------------------------------------------------------


def _num(value: Any, spec: str = ".4f") -> str:
    return "—" if value is None else format(value, spec)


def render_table(report: SpendReport) -> list[str]:
    """A short human table of :func:`spend_report` (``capevolve spend --table``)."""
    b, s, a = report["best"], report["spent"], report["afford"]
    lines = [
        f"capevolve spend — run {report['run_id']}",
        f"best {b['tag']!r}: val mean {_num(b['val_mean'])} (SE {_num(b['se'])}), "
        f"coverage {b['coverage']:.0%} of {b['tasks']} tasks × {b['trials']} trials",
        f"spent: {s['rollouts']} rollouts, runner ${s['runner_usd']:.4f}"
        + ("" if s["runner_spend_metered"] is not False else " (UNMETERED: $0 reported)")
        + f", optimizer ${s['optimizer_usd']:.4f} / {s['optimizer_tokens']:.0f} tokens / "
        f"{s['optimizer_seconds']:.0f} s, {s['iterations']} iterations, stall {s['stall']}, "
        f"wall clock {_num(s['wall_clock_seconds'], '.0f')} s",
        "",
        f"{'ceiling':<18}{'used':>12}{'limit':>12}{'share':>8}",
    ]
    for name, c in report["ceilings"].items():
        used = f"{c['used']:.4f}" if isinstance(c["used"], float) and name == "max_usd" else str(c["used"])
        share = "—" if c["fraction"] is None else f"{c['fraction']:.0%}"
        lines.append(f"{name:<18}{used:>12}{_num(c['limit'], 'g'):>12}{share:>8}")
    lines.append("")
    affordable = a["affordable"] if isinstance(a["affordable"], str) else ("yes" if a["affordable"] else "NO")
    lines.append(
        f"{a['n_siblings']} sibling(s): {a['rollouts']['total']} rollouts "
        f"({a['rollouts']['siblings']} siblings + {a['rollouts']['null_controls']} nulls + "
        f"{a['rollouts']['best']} best), ${_num(a['usd_needed'])} → affordable: {affordable}"
    )
    lines += [f"  blocked by {x['ceiling']}: {x['message']}" for x in a["blockers"]]
    lines += [f"  note: {n}" for n in a["notes"]]
    for p in report["constraints"]["predicates"]:
        lines.append(
            f"stop condition {p['clause']!r}: {'MET' if p['met'] else 'unmet'} (actual {p['actual']})"
        )
    for amb in report["constraints"]["ambiguous"]:
        lines.append(f"stop condition {amb['clause']!r}: AMBIGUOUS — {amb['reason']}")
    v = report["val_reuse"]
    lines.append(
        f"val reuse ({v['schedule']}): {v['decisions']} gate decision(s) on val so far; the next gets "
        f"α = {v['next_alpha']:.3g}; MDE at that α with {v['val_tasks']} tasks: {_num(v['mde'], '+.3f')} "
        f"(target {v['target_effect']:+g})"
    )
    lines.append(f"  {v['advice']}")
    lines.append(report["calibration"]["text"])
    screens = report.get("screens") or {}
    if screens.get("screens"):
        lines.append(
            f"subset screens: {screens['kills']} killed, {screens['promotes']} promoted; "
            f"{screens['fired']} rollouts fired, {screens['saved']} saved, "
            f"net {screens['net_rollouts']:+d} — {screens['verdict']}"
        )
    r = report["recommendation"]
    lines += ["", f"recommendation: {r['action']} — {r['reason']}"]
    return lines
