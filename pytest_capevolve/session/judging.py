"""Judging and booking: a gate session's round of verdicts, and the decisions they become.

Controller only, after the run loop, from what is persisted (never from the reports alone):
the null controls are judged first and their deltas set the floor; the candidates are then
gated as a round (:mod:`..decide.rounds`: serially in the order given, re-gated after an
accept, one family-wise α); the verdict files are written. In ``--capevolve-commit auto``
mode each verdict is booked as a decision through the same code as ``capevolve commit``.
"""

from __future__ import annotations

from dataclasses import replace

from ..decide.evidence import ByTag
from ..decide.gate import ACCEPT, INDECISIVE, GateConfig, Verdict
from ..decide.judging import Evidence, as_null, gate_config, null_deltas, verdict_file
from ..decide.looks import looks_record
from ..decide.rounds import gate_round
from ..loop.commit import INDECISIVE as BOOKED_INDECISIVE
from ..loop.commit import CommitRefused, book
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
    """(null controls' verdicts, candidates' verdicts in the order given), written to
    ``verdicts/``; each candidate's ``against`` names the best it was gated against."""
    config = gate_config(spec, veto_regressions=gate.veto_regressions)
    evidence = Evidence(by_tag, plan.task_ids, plan.num_trials, rundir.snapshot_size)
    nulls = [as_null(evidence.judge(tag, best, config)) for tag in null_tags]
    floor = null_deltas(nulls)

    def judged(tag: str, against: str, level: GateConfig) -> Verdict:
        return evidence.judge(tag, against, level, floor)

    siblings = [c.tag for c in plan.candidates if c.tag != best and c.tag not in null_tags]
    verdicts = [
        with_looks(spec, v, 1) for v in gate_round(judged, siblings, best, config, gate.multiple).verdicts
    ]
    for verdict in nulls:
        rundir.write_verdict(verdict_file(verdict, null_control=True))
    for verdict in verdicts:
        rundir.write_verdict(verdict_file(verdict, null_control=False, nulls=null_tags))
    return nulls, verdicts


def with_looks(spec: Spec, verdict: Verdict, look: int) -> Verdict:
    """The verdict with the look it was decided at (1 = the first gate; a grow adds one) and
    the α schedule across looks (:mod:`..decide.looks`)."""
    record = looks_record(spec.gate_alpha, look, spec.grow_max_looks)
    return replace(verdict, details={**verdict.details, "looks": record})


def booked_as(spec: Spec, verdict: Verdict) -> tuple[str, str | None]:
    """The decision (and basis) ``--capevolve-commit auto`` books for a verdict. When the spec
    allows growth, Δ̄ > 0 under the bar with looks left is ``provisional`` (grow it), and with
    none left ``inconclusive``."""
    if verdict.decision == ACCEPT:
        return "accept", None
    if verdict.decision == INDECISIVE:
        return BOOKED_INDECISIVE, verdict.basis
    if verdict.basis == "micro_test_fail":
        return "reject", "micro_test_fail"
    look = int(verdict.details.get("looks", {}).get("look", 1))
    if spec.grow_max_looks > 1 and verdict.basis in ("exact", "null_floor") and (verdict.delta_mean or 0) > 0:
        return ("provisional", None) if look < spec.grow_max_looks else ("inconclusive", None)
    return "reject", "gate"


def book_verdicts(spec: Spec, rundir: RunDir, verdicts: list[Verdict]) -> list[str]:
    """Book each verdict as a decision, in order (``--capevolve-commit auto``); one line each
    saying what was booked, or why not (a tag is decided once)."""
    lines = []
    for verdict in verdicts:
        decision, basis = booked_as(spec, verdict)
        try:
            book(spec, rundir, verdict.tag, decision, basis=basis, note=f"gate session: {verdict.reason}")
        except CommitRefused as exc:
            lines.append(f"{verdict.tag}: verdict written, decision not booked: {exc}")
            continue
        lines.append(f"{verdict.tag}: booked {decision}" + (f" ({basis})" if basis else ""))
    return lines
