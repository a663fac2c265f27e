"""``capevolve judge-noise TAG``: split the paired delta's variance into the judge's share and the agent's.

Re-scores persisted val outputs with the adapter's stochastic scorer; pays no rollout and writes nothing."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

import numpy as np

from ..._engine.judging import declared_stochastic, judge_seed, score_rollout_now
from ..._project.adapter import AdapterError, Rollout, Task, check_reward
from ..._project.blocks import local_trial
from ..._stats.judge_noise import JudgeSplit, RescoreAdvice, arm_within, rescore_advice, split
from ..._store.log.event_kinds import ROLLOUT
from ..._store.rollouts.record import RolloutRecord
from ..._store.rundir import RunDir
from ...exitcodes import Refusal

GATE_SPLIT = "val"  # the split every verdict is decided on (.verdicts, which imports this module)


class JudgeNoiseRefusal(Refusal):
    """Nothing to split: the message says why, in one line."""


def _rescored(adapter: Any, pool: dict[str, Task], record: RolloutRecord, rescores: int) -> list[float]:
    task = pool.get(record.task_id)
    if task is None:
        raise JudgeNoiseRefusal(
            f"task {record.task_id!r} of a persisted rollout is not in the adapter's tasks"
        )
    rollout = Rollout(task_id=record.task_id, output=record.output, trace=record.trace)
    judged = score_rollout_now(adapter, task, rollout, seed=record.seed, rescores=rescores)
    rewards = (judged.judge or {}).get("rewards") or [judged.score.reward]
    return [check_reward(r, f"score({task.id!r})") for r in rewards]


def judge_noise(
    rundir: RunDir,
    adapter: Any,
    pool: dict[str, Task],
    tag: str,
    *,
    against: str,
    rescores: int,
    cost_ratio: float | None = None,
) -> dict[str, Any]:
    """The split for ``tag`` against ``against`` on val. ``cost_ratio``: a rollout's agent run in judge calls
    (None: r, said as assumed)."""
    if not declared_stochastic(adapter):
        raise JudgeNoiseRefusal(
            f"{type(adapter).__name__} does not declare stochastic_score = True: its score() is "
            "deterministic, so all of the delta's variance is the agent's"
        )
    if rescores < 2:
        raise JudgeNoiseRefusal(f"--rescores {rescores}: the judge's variance needs at least 2")
    per_arm: dict[str, dict[str, list[list[float]]]] = {tag: defaultdict(list), against: defaultdict(list)}
    held = HeldToEvents(rundir)
    for record in rundir.rollouts.rollouts("val"):
        if record.tag in per_arm and record.valid:
            try:
                held.check(record, "its output and trace are", "it is not re-scored")
                per_arm[record.tag][record.task_id].append(_rescored(adapter, pool, record, rescores))
            except (AdapterError, EditedRescores) as exc:
                raise JudgeNoiseRefusal(str(exc)) from None
    tasks = sorted(set(per_arm[tag]) & set(per_arm[against]))
    if len(tasks) < 2:
        raise JudgeNoiseRefusal(
            f"{tag!r} and {against!r} share {len(tasks)} val task(s) with valid rollouts; the split needs 2"
        )
    delta_mean, result, advice = _split_tasks(per_arm[tag], per_arm[against], tasks, rescores, cost_ratio)
    return {
        "tag": tag,
        "against": against,
        "split": "val",
        "n_tasks": result.n_tasks,
        "rescores": rescores,
        "judge_seeds": f"rollout seed + {judge_seed(0, 1)} x j, j = 0..{rescores - 1}",
        "delta_mean": delta_mean,
        "se": float(np.sqrt(result.var_total)),
        **_shares(result),
        "cost_ratio": advice.cost_ratio,
        "cost_ratio_assumed": advice.cost_ratio_assumed,
        **_advised(advice),
    }


def render(report: dict[str, Any]) -> list[str]:
    return (
        f"judge noise: {report['tag']} vs {report['against']} on val, {report['n_tasks']} tasks, "
        f"{report['rescores']} re-scores per output (no rollout paid)\n"
        f"  Δ̄ {report['delta_mean']:+.4f}  SE {report['se']:.4f}  "
        f"(SE counts both: every delta is of averaged re-scores)\n"
        f"  Var(Δ̄) = judge {report['var_judge']:.6f} ({report['judge_share']:.0%}) + "
        f"agent {report['var_agent']:.6f} ({report['agent_share']:.0%})\n"
        f"  within a task: the judge's share {report['within_task_judge_share']:.0%}\n"
        f"  {report['advice']}"
    ).split("\n")


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
    _, result, advice = _split_tasks(candidate, best, tasks, sizes.pop())
    return {
        "rescores": result.rescores,
        "n_tasks": result.n_tasks,
        **_shares(result),
        "note": "the gate's SE is of deltas of averaged re-scores: it holds both shares",
        **_advised(advice),
    }


def _split_tasks(
    candidate: PerTask, best: PerTask, tasks: list[str], rescores: int, cost_ratio: float | None = None
) -> tuple[float, JudgeSplit, RescoreAdvice]:
    deltas, judge, within = [], [], []
    for t in tasks:
        cand, base = np.array(candidate[t]), np.array(best[t])
        deltas.append(cand.mean() - base.mean())
        (jc, wc), (jb, wb) = arm_within(cand), arm_within(base)
        judge.append(jc + jb)
        within.append(wc + wb)
    result = split(np.array(deltas), np.array(judge), np.array(within), rescores)
    return (
        float(np.mean(deltas)),
        result,
        rescore_advice(np.array(judge), np.array(within), rescores, cost_ratio),
    )


def _shares(result: JudgeSplit) -> dict[str, Any]:
    return {
        "var_total": result.var_total,
        "var_judge": result.var_judge,
        "var_agent": result.var_agent,
        "judge_share": result.judge_share,
        "agent_share": result.agent_share,
        # what the advice reads: the judge's part of the noise within a task (not of Var(Δ̄), which
        # between-task spread can leave at 0 % while the judge still dominates within a task)
        "within_task_judge_share": 0.0
        if result.within_total <= 0
        else result.within_judge / result.within_total,
    }


def _advised(advice: RescoreAdvice) -> dict[str, Any]:
    return {
        "best_rescores": advice.best,
        "best_rescores_ci": [advice.low, advice.high],
        "answer": advice.answer,
        "advice": advice.text,
    }
