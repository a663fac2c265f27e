"""What the dashboard draws, read from a run dir once: pure numbers, no HTML.

Reads the run only through :class:`~pytest_capevolve._store.rundir.RunDir`, and never the test
split (the seal's numbers come in through :class:`~pytest_capevolve._show.measure.Measurement`).
Every missing number stays None: a task not evaluated is not a reward of 0."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ... import _stats as stats
from ..._decide.alpha_budget import shown_decision
from ..._project.candidate import SEED_TAG
from ..._store.decisions.state_tally import FORCED_LABEL, label_of, short
from ..._store.log.event_kinds import DECISION, ROLLOUT, SCREEN, VERDICT
from ..._store.readers.evidence import ByTag, index_records, reward_matrix
from ..._store.rundir import RunDir
from ..measure import Measurement, confinement_of, delta_lines, table_rows

GATE_SPLIT = "val"


@dataclass
class Log:
    """What the page reads of ``events.jsonl``, folded line by line as it is read (once per page):
    60,000 rollouts held as events would outweigh everything else the page needs, so each leaves
    a count and its val tag's first place."""

    events: list[dict[str, Any]] = field(default_factory=list)  # every event but the rollouts
    numbers: list[int] = field(default_factory=list)  # each kept event's place in the log
    count: int = 0  # events read, rollouts included
    first_val_rollout: dict[str, int] = field(default_factory=dict)  # tag → place of its first

    def add(self, event: dict[str, Any]) -> None:
        number = self.count
        self.count += 1
        if event.get("kind") != ROLLOUT:
            self.events.append(event)
            self.numbers.append(number)
        elif event.get("split") == GATE_SPLIT:
            self.first_val_rollout.setdefault(str(event.get("tag")), number)


def read_log(rundir: RunDir) -> Log:
    """The log folded into a :class:`Log`; a damaged line raises the log's own error."""
    log = Log()
    if rundir.log.events_after(0, 0, log.add) is None:
        return folded(rundir.log.events())
    return log


def folded(events: Iterable[dict[str, Any]]) -> Log:
    """The events folded into a :class:`Log` in order."""
    log = Log()
    for event in events:
        log.add(event)
    return log


# the drill-down shows feedback and output for at most this many rollouts (those that scored
# below 1, in task order), each read from its file; every other rollout shows its reward from the
# index: a page for 60,000 rollouts must not open 60,000 files
DETAIL_LIMIT = 200


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
class Column:
    """One tag's heatmap column, a task a row: mean over valid trials (NaN: none), valid trials,
    infra errors. Arrays, not a :class:`Cell` per task: a page of 10,000 tasks must not hold
    10,000 objects per tag (:meth:`Dashboard.rows_of_cells` makes them a row at a time)."""

    means: np.ndarray
    valid: np.ndarray
    infra: np.ndarray


@dataclass(frozen=True)
class BestPoint:
    """The best after ``iteration`` decisions, with its val mean and 95% t interval over tasks;
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
class Decision:
    tag: str
    parent: str | None
    decision: str
    basis: str | None
    delta_mean: float | None
    p_value: float | None


@dataclass
class Dashboard:
    run_id: str
    best: str
    num_trials: int
    task_ids: list[str]
    tags: list[str]  # heatmap columns: every tag with a val rollout, in the order first paid
    columns: dict[str, Column]  # tag → its heatmap column (:meth:`rows_of_cells`)
    best_so_far: list[BestPoint]
    verdicts: list[VerdictRow]
    null_band: float | None  # the largest |Δ̄| of the null controls: the gate's noise floor
    decisions: list[Decision]
    best_label: str | None = None  # a forced or re-gated best says so beside its name
    table: list[tuple[str, ...]] = field(default_factory=list)  # measure's honest table
    labels: list[str] = field(default_factory=list)
    # measure's paired best − seed lines (val; test once sealed): the held-out gain, at the top
    deltas: list[str] = field(default_factory=list)
    # tags with more val trials than num_trials (grown): tag → its trials. The heatmap and the
    # curves pool the first num_trials of every tag; a grown verdict pools all of them
    grown_trials: dict[str, int] = field(default_factory=dict)
    # the drill-down's source: the val records (tag → (task, trial) → record, held by reference:
    # a session's own), each tag's trials per task, and the few rollouts shown in detail
    val: ByTag = field(default_factory=dict)
    trial_counts: dict[str, int] = field(default_factory=dict)
    details: dict[tuple[int, str, int], Trial] = field(default_factory=dict)

    def rows_of_cells(self) -> Iterator[list[Cell]]:
        """Every task's heatmap cells in column order, each column's arrays turned to numbers once
        (one conversion, not three per cell)."""
        lists = [
            (tag, column.means.tolist(), column.valid.tolist(), column.infra.tolist())
            for tag in self.tags
            for column in (self.columns[tag],)
        ]
        for row in range(len(self.task_ids)):
            yield [
                Cell(row, tag, float(means[row]) if valid[row] else None, int(valid[row]), int(infra[row]))
                for tag, means, valid, infra in lists
            ]


def collect(
    rundir: RunDir, num_trials: int, measurement: Measurement | None = None, val: ByTag | None = None
) -> Dashboard:
    """Read the run once into the dashboard's numbers (``val``: records a val session just read)."""
    splits = rundir.splits() or {}
    task_ids = [str(t) for t in splits.get(GATE_SPLIT, [])]
    if val is None:
        val = index_records(rundir.rollouts.indexed_rollouts(GATE_SPLIT)) if task_ids else {}
    state = rundir.state.read_state()
    log = read_log(rundir)
    events = log.events
    tags = sorted(val, key=lambda tag: (tag != SEED_TAG, log.first_val_rollout.get(tag, log.count), tag))
    matrices = {tag: reward_matrix(val.get(tag, {}), task_ids, num_trials) for tag in tags}
    decisions = [_decision(e) for e in events if e.get("kind") == DECISION]
    best = str(state.get("best_id", SEED_TAG))
    accepts = (e for e in reversed(events) if e.get("kind") == DECISION and e.get("decision") == "accept")
    best_label = next((_label(e) for e in accepts if e.get("tag") == best), None)
    checked = rundir.verdicts.checked_all()
    rows = _verdict_rows(checked, log)
    verdicts = _booked(rows + _screen_kill_rows(log, {row.tag for row in rows}), log)
    nulls = [abs(v.delta_mean) for v in verdicts if v.null_control and v.delta_mean is not None]
    said = measurement.confinement if measurement is not None else confinement_of(checked, events)
    trial_counts = {tag: max((k for _, k in arm), default=-1) + 1 for tag, arm in val.items()}
    dash = Dashboard(
        run_id=rundir.run_id,
        best=best,
        best_label=best_label,
        num_trials=num_trials,
        task_ids=task_ids,
        tags=tags,
        columns=_columns(val, matrices, task_ids, tags, num_trials),
        best_so_far=best_so_far(decisions, matrices),
        verdicts=verdicts,
        null_band=max(nulls) if nulls else None,
        decisions=decisions,
        table=table_rows(measurement) if measurement is not None else [],
        labels=[
            *(measurement.labels if measurement is not None else []),
            f"candidate code: {said['candidate_code']}; optimizer: {said['optimizer']}",
        ],
        deltas=delta_lines(measurement) if measurement is not None else [],
        grown_trials={tag: n for tag, n in sorted(trial_counts.items()) if n > num_trials},
        val=val,
        trial_counts=trial_counts,
    )
    dash.details = _details(rundir, dash)
    return dash


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _columns(
    val: ByTag, matrices: dict[str, np.ndarray], task_ids: list[str], tags: list[str], num_trials: int
) -> dict[str, Column]:
    rows = {task_id: row for row, task_id in enumerate(task_ids)}
    columns = {}
    for tag in tags:
        infra = np.zeros(len(task_ids), dtype=np.int64)
        for (task_id, k), record in val.get(tag, {}).items():
            if record.infra_error and k < num_trials and task_id in rows:
                infra[rows[task_id]] += 1
        valid = np.sum(~np.isnan(matrices[tag]), axis=1)
        means = np.full(len(task_ids), np.nan)
        held = np.flatnonzero(valid)
        if held.size:  # row by row, as np.nanmean sums one row alone (bit for bit: test_dashboard_pieces)
            means[held] = np.nanmean(matrices[tag][held], axis=1)
        columns[tag] = Column(means, valid, infra)
    return columns


def _details(rundir: RunDir, dash: Dashboard) -> dict[tuple[int, str, int], Trial]:
    """The first :data:`DETAIL_LIMIT` val rollouts that scored below 1 in the drill-down's order,
    read from their files; keyed by (task row, tag, trial). Only the rollouts below 1 are put in
    that order: a run of 60,000 that all scored 1 walks its records once, not task by task."""
    rows_of: dict[str, list[int]] = {}
    for row, task_id in enumerate(dash.task_ids):
        rows_of.setdefault(task_id, []).append(row)
    column = {tag: position for position, tag in enumerate(dash.tags)}
    below = sorted(
        (row, column[tag], k, tag, record)
        for tag, arm in dash.val.items()
        if tag in column
        for (task_id, k), record in arm.items()
        # not ``< 1``: what the drill-down showed before skipped only a reward of 1 or more
        if record.reward is not None and not record.reward >= 1 and k < dash.trial_counts.get(tag, 0)
        for row in rows_of.get(task_id, ())
    )
    details: dict[tuple[int, str, int], Trial] = {}
    for row, _, k, tag, record in below:
        if len(details) >= DETAIL_LIMIT:
            break
        full = rundir.rollouts.read_rollout(record.split, record.task_id, record.tag, record.trial)
        if full is None:
            continue
        output = full.output if isinstance(full.output, str) else _short_json(full.output)
        feedback = str(full.feedback or "")
        details[(row, tag, k)] = Trial(tag, k, full.reward, full.infra_error, feedback, output)
    return details


def _short_json(value: Any) -> str:
    if value is None:
        return ""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _mean(matrix: np.ndarray | None) -> float | None:
    return None if matrix is None else stats.mean_se(stats.task_means(matrix))[0]


def _mean_ci(matrix: np.ndarray | None) -> tuple[float | None, tuple[float, float] | None]:
    if matrix is None:
        return None, None
    means = stats.task_means(matrix)
    means = means[~np.isnan(means)]
    if means.size == 0:
        return None, None
    return float(np.mean(means)), stats.t_ci(means)


def best_so_far(decisions: list[Decision], matrices: dict[str, np.ndarray]) -> list[BestPoint]:
    """Iteration 0 is the seed; each booked decision is one iteration, and an accept moves the
    best."""

    @functools.cache
    def numbers(tag: str) -> tuple[float | None, tuple[float, float] | None]:
        return _mean_ci(matrices.get(tag))

    best = SEED_TAG
    points = [BestPoint(0, best, *numbers(best))]
    for iteration, decision in enumerate(decisions, start=1):
        if decision.decision == "accept":
            best = decision.tag
        mean, ci = numbers(best)
        candidate_mean = _mean(matrices.get(decision.tag))
        points.append(BestPoint(iteration, best, mean, ci, decision.tag, decision.decision, candidate_mean))
    return points


def _label(event: dict[str, Any]) -> str | None:
    """A forced or re-gated accept's label, shown wherever its decision is (``decisions/state_tally``)."""
    return FORCED_LABEL if event.get("against_gate") else label_of(event)


def _decision(event: dict[str, Any]) -> Decision:
    return Decision(
        tag=str(event.get("tag")),
        parent=None if event.get("parent") is None else str(event.get("parent")),
        decision=str(event.get("decision")),
        basis=_label(event) or (None if event.get("basis") is None else str(event.get("basis"))),
        delta_mean=_number(event.get("delta_mean")),
        p_value=_number(event.get("p_value")),
    )


def _screen_kill_rows(log: Log, with_verdict: set[str]) -> list[VerdictRow]:
    """A candidate a subset screen killed has no verdict file (a screen never writes one), yet
    it was decided: it gets a forest row of its own, its Δ̄ on the screened tasks, no CI."""
    killed: dict[str, dict[str, Any]] = {}
    for event in log.events:
        if event.get("kind") == SCREEN:
            tag = str(event.get("tag"))
            if event.get("decision") == "kill":
                killed[tag] = event
            else:
                killed.pop(tag, None)  # a later screen promoted it
    return [
        VerdictRow(
            tag=tag,
            against=str(event.get("against", "")),
            decision="reject",
            basis=str(event.get("basis", "")),
            null_control=False,
            delta_mean=_number(event.get("delta_mean")),
            ci=None,
            bar=None,
            p_value=_number(event.get("p_harm")),
            n_tasks=int(event.get("tasks") or 0),
            reason=f"killed by a {event.get('screen')} screen on {event.get('tasks')} tasks "
            f"(basis {event.get('basis')}); p is the one-sided p that it is worse",
        )
        for tag, event in sorted(killed.items())
        if tag not in with_verdict
    ]


def _booked(rows: list[VerdictRow], log: Log) -> list[VerdictRow]:
    """Each verdict row as the decision booked on it: a decision logged after the tag's last
    verdict (``capevolve commit``, a session's auto booking, a forced accept) is what the row
    shows and is coloured by; a verdict written after the last booking (a grow) shows itself."""
    last_verdict: dict[str, int] = {}
    booked: dict[str, tuple[int, str]] = {}
    for number, event in zip(log.numbers, log.events, strict=True):
        tag = str(event.get("tag"))
        if event.get("kind") == VERDICT:
            last_verdict[tag] = number
        elif event.get("kind") == DECISION and event.get("decision"):
            forced = f" ({short(label)})" if (label := _label(event)) else ""  # not the gate's plain accept
            booked[tag] = (number, str(event["decision"]) + forced)
    return [
        replace(row, decision=booked[row.tag][1])
        if row.tag in booked and booked[row.tag][0] > last_verdict.get(row.tag, -1)
        else row
        for row in rows
    ]


def _verdict_rows(files: dict[str, dict[str, Any]], log: Log) -> list[VerdictRow]:
    """One row per verdict file, in the order the verdicts were (last) written."""
    order = {
        str(e.get("tag")): n for n, e in zip(log.numbers, log.events, strict=True) if e.get("kind") == VERDICT
    }
    rows = []
    for tag, verdict in sorted(files.items(), key=lambda kv: (order.get(kv[0], log.count), kv[0])):
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
