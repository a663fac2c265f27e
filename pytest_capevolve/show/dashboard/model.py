"""What the dashboard draws, read from a run dir once: pure numbers, no HTML.

Controller side (end of a session) or the ``capevolve dashboard`` command. Reads the run only
through :class:`~pytest_capevolve.store.rundir.RunDir` — val rollouts, verdicts, decisions,
events, state — and never the test split (the seal's numbers come in through
:class:`~pytest_capevolve.show.measure.Measurement`). Every missing number stays None: a task
not evaluated is not a reward of 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import stats
from ...decide.evidence import ByTag, index_records, reward_matrix
from ...decide.looks import shown_decision
from ...project.candidate import SEED_TAG
from ...store.record import RolloutRecord
from ...store.rundir import RunDir
from ..measure import Measurement, table_rows

GATE_SPLIT = "val"
# the drill-down shows feedback and output for at most this many rollouts (those that scored
# below 1, in task order), each read from its file; every other rollout shows its reward from the
# index: a page for 60,000 rollouts must not open 60,000 files
DETAIL_LIMIT = 200
MAX_SPEND_POINTS = 400  # a polyline past this many points draws nothing more a reader can see


@dataclass(frozen=True)
class Trial:
    tag: str
    trial: int
    reward: float | None
    infra_error: str | None
    feedback: str
    output: str
    detail: bool = True  # feedback and output were read from the rollout's file


@dataclass(frozen=True)
class Cell:
    """One task × candidate cell of the heatmap: the mean over valid trials, or why there is none."""

    task: int  # index into ``Dashboard.task_ids``
    tag: str
    mean: float | None
    valid: int
    infra: int

    @property
    def state(self) -> str:
        if self.mean is not None:
            return "scored"
        return "infra" if self.infra else "missing"


@dataclass(frozen=True)
class BestPoint:
    """The best after ``iteration`` decisions, with its val mean and 95% bootstrap CI over tasks;
    ``candidate`` is what that decision was about (None at iteration 0, the seed)."""

    iteration: int
    best: str
    mean: float | None
    ci: tuple[float, float] | None
    candidate: str | None = None
    decision: str | None = None
    candidate_mean: float | None = None


@dataclass(frozen=True)
class VerdictRow:
    tag: str
    against: str
    decision: str
    basis: str
    null_control: bool
    delta_mean: float | None
    ci: tuple[float, float] | None
    bar: float | None
    p_value: float | None
    n_tasks: int
    reason: str


@dataclass(frozen=True)
class SpendPoint:
    seconds: float  # since the run's first event
    rollouts: int
    usd: float


@dataclass(frozen=True)
class Decision:
    tag: str
    parent: str | None
    decision: str
    basis: str | None
    delta_mean: float | None
    p_value: float | None
    note: str


@dataclass
class Dashboard:
    run_id: str
    best: str
    num_trials: int
    task_ids: list[str]
    tags: list[str]  # heatmap columns: every tag with a val rollout, in the order first paid
    cells: list[Cell]
    trials: dict[int, list[Trial]]  # task index → its val rollouts, for the drill-down
    best_so_far: list[BestPoint]
    verdicts: list[VerdictRow]
    null_band: float | None  # the largest |Δ̄| of the null controls: the gate's noise floor
    spend: list[SpendPoint]
    ceilings: dict[str, float | None]  # max_metric_calls, max_usd
    decisions: list[Decision]
    table: list[tuple[str, ...]] = field(default_factory=list)  # measure's honest table
    labels: list[str] = field(default_factory=list)
    # tags with more val trials than num_trials (grown): tag → its trials. The heatmap and the
    # curves pool the first num_trials of every tag; a grown verdict pools all of them
    grown_trials: dict[str, int] = field(default_factory=dict)


def collect(
    rundir: RunDir, num_trials: int, measurement: Measurement | None = None, val: ByTag | None = None
) -> Dashboard:
    """Read the run once and turn it into the dashboard's numbers. ``val``: the val records
    when the caller has just read them (a val session), so they are not read again. Outcome
    fields come from the index; feedback and output only for the rollouts the drill-down
    details (:data:`DETAIL_LIMIT`), from their files."""
    splits = rundir.splits() or {}
    task_ids = [str(t) for t in splits.get(GATE_SPLIT, [])]
    if val is None:
        val = index_records(rundir.indexed_rollouts(GATE_SPLIT)) if task_ids else {}
    state = rundir.read_state()
    events = _events(rundir)
    tags = _tag_order(val, events)
    matrices = {tag: reward_matrix(val.get(tag, {}), task_ids, num_trials) for tag in tags}
    decisions = [_decision(e) for e in events if e.get("kind") == "decision"]
    verdicts = _verdict_rows(rundir.verdicts(), events)
    nulls = [abs(v.delta_mean) for v in verdicts if v.null_control and v.delta_mean is not None]
    budget = state.get("budget") or {}
    return Dashboard(
        run_id=rundir.run_id,
        best=str(state.get("best_id", SEED_TAG)),
        num_trials=num_trials,
        task_ids=task_ids,
        tags=tags,
        cells=_cells(val, matrices, task_ids, tags, num_trials),
        trials=_trials(rundir, val, task_ids, tags),
        best_so_far=best_so_far(decisions, matrices),
        verdicts=verdicts,
        null_band=max(nulls) if nulls else None,
        spend=spend_series(events),
        ceilings={key: _number(budget.get(key)) for key in ("max_metric_calls", "max_usd")},
        decisions=decisions,
        table=table_rows(measurement) if measurement is not None else [],
        labels=list(measurement.labels) if measurement is not None else [],
        grown_trials=_grown_trials(val, num_trials),
    )


ROLLOUT_FIELDS = ("kind", "split", "tag", "ts", "cost_usd")  # what the page reads of a rollout event


def _events(rundir: RunDir) -> list[dict[str, Any]]:
    """The log, each rollout event cut to :data:`ROLLOUT_FIELDS` as it is read (a run's log is
    mostly rollouts: 60,000 whole events would outweigh everything else the page needs)."""

    def view(event: dict[str, Any]) -> dict[str, Any]:
        if event.get("kind") != "rollout":
            return event
        return {key: event[key] for key in ROLLOUT_FIELDS if key in event}

    read = rundir.events_after(0, 0, view)
    return rundir.events() if read is None else read[0]  # a damaged line: the log's own error


def _grown_trials(val: ByTag, num_trials: int) -> dict[str, int]:
    trials = {tag: max((k for _, k in arm), default=-1) + 1 for tag, arm in val.items()}
    return {tag: n for tag, n in sorted(trials.items()) if n > num_trials}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _tag_order(val: ByTag, events: list[dict[str, Any]]) -> list[str]:
    """Tags with val rollouts, seed first, then in the order their first rollout was logged."""
    first: dict[str, int] = {}
    for number, event in enumerate(events):
        if event.get("kind") == "rollout" and event.get("split") == GATE_SPLIT:
            first.setdefault(str(event.get("tag")), number)
    return sorted(val, key=lambda tag: (tag != SEED_TAG, first.get(tag, len(events)), tag))


def _cells(
    val: ByTag, matrices: dict[str, np.ndarray], task_ids: list[str], tags: list[str], num_trials: int
) -> list[Cell]:
    rows = {task_id: row for row, task_id in enumerate(task_ids)}
    infra: dict[tuple[int, str], int] = {}
    for tag in tags:
        for (task_id, k), record in val.get(tag, {}).items():
            if record.infra_error and k < num_trials and task_id in rows:
                infra[(rows[task_id], tag)] = infra.get((rows[task_id], tag), 0) + 1
    valid = {tag: np.sum(~np.isnan(matrices[tag]), axis=1) for tag in tags}
    cells = []
    for row in range(len(task_ids)):
        for tag in tags:
            count = int(valid[tag][row])
            mean = float(np.nanmean(matrices[tag][row])) if count else None
            cells.append(Cell(row, tag, mean, count, infra.get((row, tag), 0)))
    return cells


def _trials(rundir: RunDir, val: ByTag, task_ids: list[str], tags: list[str]) -> dict[int, list[Trial]]:
    """Each task's val rollouts, tag by tag in trial order. The first :data:`DETAIL_LIMIT` that
    scored below 1 carry their feedback and output, read from their files."""
    by_task: dict[str, list[tuple[int, int, RolloutRecord]]] = {}
    for column, tag in enumerate(tags):
        for (task_id, k), record in val.get(tag, {}).items():
            by_task.setdefault(task_id, []).append((column, k, record))
    out: dict[int, list[Trial]] = {}
    shown = 0
    for row, task_id in enumerate(task_ids):
        trials = out[row] = []
        for column, k, record in sorted(by_task.get(task_id, ()), key=lambda c: c[:2]):
            tag = tags[column]
            if shown < DETAIL_LIMIT and record.reward is not None and record.reward < 1:
                full = rundir.read_rollout(record.split, record.task_id, record.tag, record.trial)
                if full is not None:
                    shown += 1
                    output = full.output if isinstance(full.output, str) else _short_json(full.output)
                    trials.append(
                        Trial(tag, k, full.reward, full.infra_error, str(full.feedback or ""), output)
                    )
                    continue
            trials.append(Trial(tag, k, record.reward, record.infra_error, "", "", detail=False))
    return out


def _short_json(value: Any) -> str:
    if value is None:
        return ""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _mean(matrix: np.ndarray | None) -> float | None:
    if matrix is None:
        return None
    mean, _se = stats.mean_se(stats.task_means(matrix))
    return mean


def _mean_ci(matrix: np.ndarray | None, seed: int) -> tuple[float | None, tuple[float, float] | None]:
    if matrix is None:
        return None, None
    means = stats.task_means(matrix)
    means = means[~np.isnan(means)]
    if means.size == 0:
        return None, None
    return float(np.mean(means)), stats.bootstrap_ci(means, seed=seed)


def best_so_far(
    decisions: list[Decision], matrices: dict[str, np.ndarray], *, seed: int = 0
) -> list[BestPoint]:
    """Iteration 0 is the seed; each booked decision is one iteration, and an accept moves the
    best. Means and intervals are over val tasks (a best with no val rollouts has none); the
    bootstrap's fixed ``seed`` keeps the page identical when it is rebuilt."""
    cache: dict[str, tuple[float | None, tuple[float, float] | None]] = {}

    def numbers(tag: str) -> tuple[float | None, tuple[float, float] | None]:
        if tag not in cache:
            cache[tag] = _mean_ci(matrices.get(tag), seed)
        return cache[tag]

    best = SEED_TAG
    points = [BestPoint(0, best, *numbers(best))]
    for iteration, decision in enumerate(decisions, start=1):
        if decision.decision == "accept":
            best = decision.tag
        mean, ci = numbers(best)
        points.append(
            BestPoint(
                iteration,
                best,
                mean,
                ci,
                candidate=decision.tag,
                decision=decision.decision,
                candidate_mean=_mean(matrices.get(decision.tag)),
            )
        )
    return points


def _decision(event: dict[str, Any]) -> Decision:
    return Decision(
        tag=str(event.get("tag")),
        parent=None if event.get("parent") is None else str(event.get("parent")),
        decision=str(event.get("decision")),
        basis=None if event.get("basis") is None else str(event.get("basis")),
        delta_mean=_number(event.get("delta_mean")),
        p_value=_number(event.get("p_value")),
        note=str(event.get("note") or ""),
    )


def _verdict_rows(files: dict[str, dict[str, Any]], events: list[dict[str, Any]]) -> list[VerdictRow]:
    """One row per verdict file, in the order the verdicts were (last) written."""
    order: dict[str, int] = {}
    for number, event in enumerate(events):
        if event.get("kind") == "verdict":
            order[str(event.get("tag"))] = number
    rows = []
    for tag, verdict in sorted(files.items(), key=lambda kv: (order.get(kv[0], len(events)), kv[0])):
        ci = verdict.get("ci")
        rows.append(
            VerdictRow(
                tag=tag,
                against=str(verdict.get("against", "")),
                decision=shown_decision(
                    str(verdict.get("decision", "")),
                    verdict.get("basis"),
                    _number(verdict.get("delta_mean")),
                    (verdict.get("details") or {}).get("looks"),
                ),
                basis=str(verdict.get("basis", "")),
                null_control=bool(verdict.get("null_control")),
                delta_mean=_number(verdict.get("delta_mean")),
                ci=(float(ci[0]), float(ci[1])) if isinstance(ci, list | tuple) and len(ci) == 2 else None,
                bar=_number(verdict.get("bar")),
                p_value=_number(verdict.get("p_value")),
                n_tasks=int(verdict.get("n_tasks") or 0),
                reason=str(verdict.get("reason", "")),
            )
        )
    return rows


def spend_series(events: list[dict[str, Any]], max_points: int = MAX_SPEND_POINTS) -> list[SpendPoint]:
    """Cumulative rollouts paid and $ (runner + optimizer) over wall-clock time since the
    run's first event; thinned to ``max_points``, always keeping the last point."""
    if not events:
        return []
    start = float(events[0].get("ts", 0.0))
    rollouts, usd = 0, 0.0
    points = [SpendPoint(0.0, 0, 0.0)]
    for event in events:
        kind = event.get("kind")
        if kind == "rollout":
            rollouts += 1
            usd += float(event.get("cost_usd") or 0.0)
        elif kind == "decision":
            usd += float(event.get("optimizer_usd") or 0.0)
        else:
            continue
        points.append(SpendPoint(max(0.0, float(event.get("ts", start)) - start), rollouts, usd))
    if len(points) > max_points:
        step = len(points) / (max_points - 1)
        points = [points[int(i * step)] for i in range(max_points - 1)] + [points[-1]]
    return points
