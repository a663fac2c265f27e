"""A judge's preferences between a candidate's and its best's outputs: ``gate_mode: pairwise``.

Each (task, trial) valid on both arms is judged in both orders, so a lean to a position cancels, and logged
as a ``preference`` event under its session's ``judging`` claim: a judgement no claim holds, or a cell judged
twice, is refused before anything reads it. Controller only, after the run loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..._decide.verdict import ACCEPT, INDECISIVE, Verdict
from ..._engine.judging import JUDGE_SEED_STRIDE, PREFERENCE_ORDERS, prefer_in_order
from ..._project.adapter import Task
from ..._stats.pairwise import net_preference, p_greater_exact, sign_test
from ..._store.log.event_kinds import CANDIDATE_REGISTERED, JUDGE_FAILED, JUDGING, PREFERENCE
from ..._store.log.paid_by import UntrustedRecord
from ..._store.readers.evidence import Arm
from ..._store.rollouts.record import RolloutRecord
from ..._store.rundir import RunDir
from ...exitcodes import first_few
from .judge_noise import GATE_SPLIT, HeldToEvents

if TYPE_CHECKING:
    from .verdicts import Evidence

Judged = dict[tuple[str, int, str], str]  # (task, trial, order) → A / B / tie
WorstCase = tuple[tuple[int, ...], int] | None  # the nets at worst, and the cells not judged
Prefer = Callable[[str, str, tuple[Arm, Arm]], list[str]]  # judges what the log lacks; returns why not


def logged_preferences(rundir: RunDir, tag: str, against: str) -> Judged:
    """The judgements the log holds for ``tag`` against ``against``; refused where one was not made under
    its session's ``judging`` claim, or a cell was judged twice."""
    judged: Judged = {}
    held: dict[object, set[tuple[str, int, str]]] = {}  # claim -> cells it said it would judge
    problems: list[str] = []
    for e in rundir.log.of_kinds(JUDGING, PREFERENCE):
        if e.get("tag") != tag or e.get("against") != against:
            continue
        if e.get("kind") == JUDGING:
            held.setdefault(e.get("claim"), set()).update(map(tuple, e.get("cells") or ()))
            continue
        key = (e["task_id"], int(e["trial"]), e["order"])
        where = f"preference event seq {e.get('seq')} ({key[0]} t{key[1]} {key[2]})"
        if key not in held.get(e.get("claim"), ()):
            problems.append(f"{where}: no gate session's judging event holds it (written outside a session)")
        elif key in judged:
            problems.append(f"{where}: judged twice")
        else:
            judged[key] = e["preference"]
    if problems:
        shown = first_few(problems)
        raise UntrustedRecord(
            f"run {rundir.run_id}'s log holds judgements no gate session made as recorded: {shown}. "
            "Nothing is decided on them: restore events.jsonl from before the first one named (its "
            "seq), or start a new run (--capevolve-new-run)"
        )
    return judged


def judge_missing(
    rundir: RunDir, adapter: Any, pool: Mapping[str, Task], tag: str, against: str, arms: tuple[Arm, Arm]
) -> list[str]:
    """Judge and log every (task, trial, order) the log lacks; returns what kept one from being made."""
    done = logged_preferences(rundir, tag, against)
    problems: list[str] = []
    candidate, best = arms
    owed: dict[Any, list[str]] = {}
    for cell in sorted(candidate.keys() & best.keys()):
        b, a = candidate[cell], best[cell]
        missing = [o for o in PREFERENCE_ORDERS if (b.task_id, b.trial, o) not in done]
        if a.valid and b.valid and missing and b.task_id in pool:
            owed[cell] = missing
    if owed:  # what this session judges, under its claim id: each preference event names it
        held = HeldToEvents(rundir)
        cells = [[candidate[c].task_id, candidate[c].trial, o] for c, todo in owed.items() for o in todo]
        rundir.log.append_event(JUDGING, claim=rundir.claims.claim_id, tag=tag, against=against, cells=cells)
    for cell, missing in owed.items():
        b, a = candidate[cell], best[cell]
        try:
            outputs = _held_outputs(rundir, held, a, b)
            if outputs is None:
                continue
            for order in missing:
                seed = b.seed + JUDGE_SEED_STRIDE * PREFERENCE_ORDERS.index(order)
                said = prefer_in_order(adapter, pool[b.task_id], *outputs, order=order, seed=seed)
                rundir.log.append_event(
                    PREFERENCE,
                    tag=tag,
                    against=against,
                    task_id=b.task_id,
                    trial=b.trial,
                    order=order,
                    seed=seed,
                    preference=said,
                    claim=rundir.claims.claim_id,
                )
        except Exception as exc:  # a judge is called like score(): its failure is missing data
            problems.append(f"{b.task_id} trial {b.trial}: {exc}")
            rundir.log.append_event(JUDGE_FAILED, tag=tag, against=against, task_id=b.task_id, trial=b.trial)
    return problems


def failed_cells(rundir: RunDir, tag: str, against: str) -> set[tuple[str, int]]:
    """The cells whose judging failed once, under this tag or another of its bytes (``--capevolve-rerun``):
    a later judgement is a second draw (a candidate can choose where the judge fails): weighed at worst."""
    content = {e.get("tag"): e.get("content_hash") for e in rundir.log.of_kinds(CANDIDATE_REGISTERED)}
    same = {t for t, h in content.items() if h is not None and h == content.get(tag)} | {tag}
    return {
        (e["task_id"], int(e["trial"]))
        for e in rundir.log.of_kinds(JUDGE_FAILED)
        if e.get("tag") in same and e.get("against") == against
    }


def _held_outputs(
    rundir: RunDir, held: HeldToEvents, a: RolloutRecord, b: RolloutRecord
) -> tuple[Any, Any] | None:
    full_a, full_b = (rundir.rollouts.read_rollout(GATE_SPLIT, r.task_id, r.tag, r.trial) for r in (a, b))
    if full_a is None or full_b is None:
        return None
    for record in (full_a, full_b):
        held.check(record, "its output is", "it is not judged")
    return full_a.output, full_b.output


def task_nets(
    judged: Judged, task_ids: Sequence[str], trials: set[tuple[str, int]], redrawn: set[tuple[str, int]]
) -> tuple[tuple[int, ...] | None, list[str], WorstCase]:
    """Each task's net preference over ``trials`` judged in both orders; the cells judged in one order only
    (missing: the failed order could be the one that cancels a lean); and the nets at worst (each such cell,
    and each in ``redrawn``, as the best preferred in both) with their count."""
    per_task: dict[str, list[str]] = {}
    worst: dict[str, list[str]] = {}
    one_way: list[str] = []
    missing = 0
    for task, trial in sorted(trials):
        said = [judged.get((task, trial, order)) for order in PREFERENCE_ORDERS]
        both = [s for s in said if s is not None] if None not in said else []
        if both:
            per_task.setdefault(task, []).extend(both)
        kept = bool(both) and (task, trial) not in redrawn  # else at worst: the best preferred in both
        worst.setdefault(task, []).extend(both if kept else ["A"] * len(PREFERENCE_ORDERS))
        missing += not kept
        if not both and any(s is not None for s in said):
            one_way.append(f"{task} trial {trial}")
    nets = tuple(net_preference(per_task[t]) for t in task_ids if t in per_task)
    at_worst = tuple(net_preference(worst[t]) for t in task_ids if t in worst)
    return nets or None, one_way, (at_worst, missing) if missing else None


def held_to_worst_case(verdict: Verdict, worst: WorstCase) -> Verdict:
    """A pairwise accept that the cells not judged in both orders could flip is indecisive: the judge's
    failures may be the candidate's doing."""
    if verdict.decision != ACCEPT or worst is None:
        return verdict
    nets, missing = worst
    test = sign_test(nets)
    p = p_greater_exact(test.wins_b, test.wins_a)
    if p <= Fraction(str(verdict.alpha)):
        return verdict
    return replace(
        verdict,
        decision=INDECISIVE,
        reason=(
            f"{missing} trial(s) the judge did not judge in both orders at the first asking, or missing "
            "on one arm (an infra error), could flip the decision (worst-case: the best preferred in both, "
            f"p = {float(p):.4g}): could not judge; mend what makes the judge or the rollouts fail and "
            f"gate again; a new run (--capevolve-new-run) judges those afresh; {verdict.reason}"
        ),
    )


def pairwise_nets(
    rundir: RunDir, evidence: Evidence, tag: str, against: str, prefer: Prefer | None
) -> tuple[tuple[int, ...] | None, list[str], WorstCase]:
    """The net preferences a ``pairwise`` verdict reads (:func:`task_nets`), judged first where ``prefer``
    is given, else from the log alone."""
    arms = evidence.by_tag.get(tag, {}), evidence.by_tag.get(against, {})
    problems = prefer(tag, against, arms) if prefer is not None else []
    wanted, task_ids = set(evidence.task_ids), evidence.task_ids
    shown = {c for c in arms[0].keys() | arms[1].keys() if c[0] in wanted and c[1] < evidence.num_trials}
    valid = [{c for c in shown if c in arm and arm[c].valid} for arm in arms]
    cells = valid[0] & valid[1]
    # at worst, as the reward gate imputes them: trials valid on one arm only, and the candidate's paid again
    uneven, again = valid[0] ^ valid[1], {(t, k) for s, g, t, k in evidence.redrawn if g == tag}
    judged, failed = logged_preferences(rundir, tag, against), failed_cells(rundir, tag, against)
    nets, one_way, worst = task_nets(judged, task_ids, cells | uneven, failed | uneven | again)
    if one_way and not problems:  # (a gate session's problems say why an order is missing)
        problems = [f"{cell}: judged in one order only, not counted" for cell in one_way]
    return nets, problems, worst
