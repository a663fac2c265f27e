"""Judging and promotion: a gate session's verdicts, and the best they move.

Controller only, after the run loop, from what is persisted (never from the reports alone):
the null controls are judged first, their deltas set the floor, then every candidate is
gated against the best on val; the verdict files are written and an accepted candidate
becomes the best.
"""

from __future__ import annotations

from typing import Any

from ..decide.evidence import ByTag
from ..decide.gate import ACCEPT, Verdict
from ..decide.judging import Evidence, as_null, gate_config, null_deltas, verdict_file
from ..project.spec import Spec
from ..store.rundir import RunDir
from .plan import EvalPlan
from .planning import GateRequest


def judge(
    spec: Spec,
    rundir: RunDir,
    plan: EvalPlan,
    by_tag: ByTag,
    *,
    best: str,
    null_tags: list[str],
    gate: GateRequest,
) -> tuple[list[Verdict], list[Verdict]]:
    """(null controls' verdicts, candidates' verdicts), each written to ``verdicts/``."""
    config = gate_config(spec, veto_regressions=gate.veto_regressions)
    evidence = Evidence(by_tag, plan.task_ids, plan.num_trials, rundir.snapshot_size)
    nulls = [as_null(evidence.judge(tag, best, config)) for tag in null_tags]
    floor = null_deltas(nulls)
    others = [c.tag for c in plan.candidates if c.tag != best and c.tag not in null_tags]
    verdicts = [evidence.judge(tag, best, config, floor) for tag in others]
    for verdict in nulls:
        rundir.write_verdict(verdict_file(verdict, null_control=True))
    for verdict in verdicts:
        rundir.write_verdict(verdict_file(verdict, null_control=False, nulls=null_tags))
    return nulls, verdicts


def promote(rundir: RunDir, verdicts: list[Verdict], best: str) -> None:
    """An accepted candidate becomes the best (the largest Δ̄ when several are); a session
    that gated candidates and accepted none advances the stall counter."""
    with rundir.lock():  # one promotion per accept, however many sessions judged it
        _promote(rundir, verdicts, best)


def _promote(rundir: RunDir, verdicts: list[Verdict], best: str) -> None:
    accepted = [v for v in verdicts if v.decision == ACCEPT]
    current = rundir.best()
    if current != best:  # a concurrent session moved the best since this one planned
        if verdicts:
            rundir.append_event(
                "promotion_skipped", best_id=current, judged_against=best, accepted=[v.tag for v in accepted]
            )
        return
    if accepted:
        winner = max(accepted, key=lambda v: v.delta_mean or 0.0)

        def moved(state: dict[str, Any]) -> None:
            state["best_id"] = winner.tag
            state["iterations"] = int(state["iterations"]) + 1
            state["stall"] = 0

        rundir.update_state(moved)
        rundir.append_event("best_changed", best_id=winner.tag, previous=best)
    elif verdicts:
        state = rundir.update_state(lambda s: s.update(stall=int(s["stall"]) + 1))
        rundir.append_event("stalled", stall=state["stall"], best_id=best)  # state.json's stall, replayable
