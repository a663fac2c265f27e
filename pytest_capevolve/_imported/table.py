"""A plain table of (task id, trial, reward): CSV with a header row, or JSON Lines — for any
tool this package has no reader for.

Columns by the first of their names found, in any case (``docs/how-to/compare-table.md``); an
empty reward or a non-empty ``error`` is missing data, never a 0."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

from .results import ImportedRun, Outcome, ReadOptions, ResultsError, checked_reward, made_run

TASK_COLUMNS = ("task_id", "task", "sample_id", "id")
REWARD_COLUMNS = ("reward", "score")
TRIAL_COLUMNS = ("trial", "epoch", "repeat")


def read_csv(path: Path, head: Any, options: ReadOptions) -> ImportedRun:
    """``--scorer`` names the reward column; by default ``reward`` or ``score``."""
    return _run_of(path, "csv", csv_rows(path), options)


def read_jsonl(path: Path, head: Any, options: ReadOptions) -> ImportedRun:
    return _run_of(path, "jsonl", jsonl_rows(path), options)


def csv_rows(path: Path) -> list[dict[str, Any]]:
    """A CSV's rows by its header (its first row is the file's line 2)."""
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def jsonl_rows(path: Path) -> list[dict[str, Any]]:
    """A JSON Lines file's objects, refused naming the line that is not one."""
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResultsError(f"{path}:{number}: not JSON ({exc.msg}); one JSON object per line") from None
        if not isinstance(row, dict):
            raise ResultsError(f"{path}:{number}: a JSON object per line, got {type(row).__name__}")
        rows.append(row)
    return rows


def column_names(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(k for row in rows for k in row if k is not None))


def column(names: list[str], wanted: tuple[str, ...]) -> str | None:
    lowered = {name.lower().strip(): name for name in names}
    return next((lowered[w] for w in wanted if w in lowered), None)


def cell(row: dict[str, Any], column: str | None) -> str | None:
    value = row.get(column) if column else None
    return None if _blank(value) else str(value).strip()


def read_cluster_map(path: Path) -> dict[str, str]:
    """task_id → cluster from a CSV or JSONL with those two columns (``--clusters FILE``)."""
    if not path.is_file():
        raise ResultsError(f"no such clusters file: {path}")
    rows = jsonl_rows(path) if path.suffix.lower() in (".jsonl", ".ndjson") else csv_rows(path)
    names = column_names(rows)
    task_col, cluster_col = column(names, TASK_COLUMNS), column(names, ("cluster",))
    if task_col is None or cluster_col is None:
        raise ResultsError(f"{path}: a clusters file has the columns task_id, cluster; found {names}")
    found: dict[str, str] = {}
    for row in rows:
        task, cluster = cell(row, task_col), cell(row, cluster_col)
        if task is None or cluster is None:
            raise ResultsError(f"{path}: a row without a task_id or a cluster; give both on every row")
        if found.setdefault(task, cluster) != cluster:
            raise ResultsError(
                f"{path}: task {task!r} is in two clusters ({found[task]!r}, {cluster!r}); give one"
            )
    return found


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _run_of(path: Path, source: str, rows: list[dict[str, Any]], options: ReadOptions) -> ImportedRun:
    first_line, reward = 2 if source == "csv" else 1, options.scorer
    names = column_names(rows)
    rewards = (reward.lower(),) if reward else REWARD_COLUMNS
    task_col, reward_col = column(names, TASK_COLUMNS), column(names, rewards)
    if rows and (task_col is None or reward_col is None):
        missing = "task id column (task_id)" if task_col is None else "reward column (reward)"
        way = "name the columns task_id, trial, reward (and optionally seed, error)"
        if reward and task_col is not None:
            missing, way = f"column {reward!r} (--scorer)", "give every file that column, or drop --scorer"
        prefs = {"preference", "winner"} & set(names)
        alone = "; a judge's preferences are gated in a session: gate_mode: pairwise in capevolve.yaml"
        raise ResultsError(f"{path}: no {missing} among its columns {names}; {way}{alone if prefs else ''}")
    trial_col, error_col = column(names, TRIAL_COLUMNS), column(names, ("error",))
    seed_col, cluster_col = column(names, ("seed",)), column(names, ("cluster",))
    outcomes: list[Outcome] = []
    positions: Counter[str] = Counter()
    for offset, row in enumerate(rows):
        where = f"{path}:{first_line + offset}"
        task_id = cell(row, task_col)
        if task_id is None:
            raise ResultsError(f"{where}: no task id; every row names its task")
        trial = cell(row, trial_col)
        if trial is None and trial_col is not None:
            positions[task_id] += 1
            trial = str(positions[task_id])
        error = row.get(error_col) if error_col else None
        value = row.get(reward_col) if reward_col else None
        failed = not _blank(error) or _blank(value)
        outcomes.append(
            Outcome(
                task_id=task_id,
                trial=trial,
                reward=None if failed else checked_reward(value, where),
                error=(str(error) if not _blank(error) else "no reward") if failed else None,
                seed=cell(row, seed_col),
                cluster=cell(row, cluster_col),
            )
        )
    notes = [] if trial_col else ["no trial column: a task's rows are its trials, in file order"]
    return made_run(path, source, options.label, outcomes, notes)
