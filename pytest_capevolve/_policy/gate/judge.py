"""The judge in the gate: its share of the noise, and its preferences for ``gate_mode: pairwise``.

A verdict's ``judge_noise`` splits the paired delta's variance into the judge's share and the agent's,
from the re-scores its rollouts recorded. A pairwise gate has each (task, trial) valid on both arms
judged in both orders, so a lean to a position cancels, and logged as a ``preference`` event under its
session's ``judging`` claim: a judgement no claim holds, or a cell judged twice, is refused before
anything reads it (controller only, after the run loop). Every record read is held to the sha256 its
``rollout`` event logged."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._decide.verdict import ACCEPT, INDECISIVE, Verdict
from ..._engine.judging import JUDGE_SEED_STRIDE, PREFERENCE_ORDERS, prefer_in_order
from ..._project.adapter import Task
from ..._project.blocks import local_trial
from ..._stats.judge_noise import arm_within, rescore_advice, split
from ..._stats.pairwise import net_preference, p_greater_exact, sign_test
from ..._store.log.event_kinds import CANDIDATE_REGISTERED, JUDGE_FAILED, JUDGING, PREFERENCE, ROLLOUT
from ..._store.log.paid_by import UntrustedRecord
from ..._store.readers.evidence import Arm
from ..._store.rollouts.record import RolloutRecord
from ..._store.rundir import RunDir
from ...exitcodes import first_few

if TYPE_CHECKING:
    from .verdicts import Evidence

GATE_SPLIT = "val"  # the split every verdict is decided on (.verdicts, which imports this module)


RescoresByTag = dict[str, dict[tuple[str, int], list[float]]]


class EditedRescores(Exception):
    """A record's re-scores are not the bytes its rollout event recorded."""


class HeldToEvents:
    """Rollout files held to the sha256 their ``rollout`` event recorded (otherwise only the outcome is
    held, not the output, trace or re-scores)."""

    def __init__(self, rundir: RunDir) -> None:
        self.rundir = rundir
        self.logged = {
            (e.get("tag"), e.get("task_id"), e.get("trial")): e.get("sha256")
            for e in rundir.log.of_kinds(ROLLOUT)
            if e.get("split") == GATE_SPLIT
        }

    def check(self, record: RolloutRecord, what: str, so: str) -> None:
        path = self.rundir.rollouts.rollout_path(GATE_SPLIT, record.task_id, record.tag, record.trial)
        digest = self.logged.get((record.tag, record.task_id, record.trial))
        if digest is not None and hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise EditedRescores(
                f"{path.name}: {what} not what its rollout event recorded (sha256): edited after "
                f"it was written, so {so}"
            )


def recorded_rescores(rundir: RunDir) -> RescoresByTag:
    """tag → (task, trial) → the re-scores of each valid val record, each file held to its event's sha256
    (``[1, 0, 1, 0]`` rewritten ``[0.5] * 4`` keeps the mean and hides the judge's noise)."""
    found: RescoresByTag = {}
    held = HeldToEvents(rundir)
    for record in rundir.rollouts.rollouts(GATE_SPLIT):
        judge = record.judge if isinstance(record.judge, dict) else {}
        rewards = judge.get("rewards")
        if not (record.valid and isinstance(rewards, list) and len(rewards) >= 2):
            continue
        held.check(record, "its judge re-scores are", "no judge/agent split is given")
        cell = (record.task_id, local_trial(record.trial))  # block 0's: what rollouts() read
        found.setdefault(record.tag, {})[cell] = [float(r) for r in rewards]
    return found


PerTask = dict[str, list[list[float]]]  # task → its rollouts, each its r re-score rewards


def split_entry(candidate: PerTask, best: PerTask) -> dict[str, Any]:
    """A verdict's ``judge_noise`` entry; ``{}`` when fewer than two tasks are shared or r differs."""
    tasks = sorted(set(candidate) & set(best))
    sizes = {len(s) for arm in (candidate, best) for t in tasks for s in arm[t]}
    if len(tasks) < 2 or len(sizes) != 1:
        return {}
    deltas, judge, within = [], [], []
    for t in tasks:
        cand, base = np.array(candidate[t]), np.array(best[t])
        deltas.append(cand.mean() - base.mean())
        (jc, wc), (jb, wb) = arm_within(cand), arm_within(base)
        judge.append(jc + jb)
        within.append(wc + wb)
    rescores = sizes.pop()
    result = split(np.array(deltas), np.array(judge), np.array(within), rescores)
    advice = rescore_advice(np.array(judge), np.array(within), rescores)
    return {
        "rescores": result.rescores,
        "n_tasks": result.n_tasks,
        "var_total": result.var_total,
        "var_judge": result.var_judge,
        "var_agent": result.var_agent,
        "judge_share": result.judge_share,
        "agent_share": 1.0 - result.judge_share,
        # what the advice reads: the judge's part of the noise within a task (not of Var(Δ̄), which
        # between-task spread can leave at 0 % while the judge still dominates within a task)
        "within_task_judge_share": 0.0
        if result.within_total <= 0
        else result.within_judge / result.within_total,
        "note": "the gate's SE is of deltas of averaged re-scores: it holds both shares",
        "best_rescores": advice.best,
        "best_rescores_ci": [advice.low, advice.high],
        "answer": advice.answer,
        "advice": advice.text,
    }


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
