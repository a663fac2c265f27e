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


# a table's rows and, beside them, the file's line each starts on (two lists: no pair per row)
Numbered = tuple[list[int], list[dict[str, Any]]]


def read_csv(path: Path, head: Any, options: ReadOptions) -> ImportedRun:
    """``--scorer`` names the reward column; by default ``reward`` or ``score``."""
    return _run_of(path, "csv", numbered_csv_rows(path), options)


def read_jsonl(path: Path, head: Any, options: ReadOptions) -> ImportedRun:
    return _run_of(path, "jsonl", numbered_jsonl_rows(path), options)


def numbered_csv_rows(path: Path) -> Numbered:
    """A CSV's rows by its header, each with its line in the file; a row whose cells are more or
    fewer than the header's is refused (an unquoted comma in a task id shifts every cell after it).
    A byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name."""
    lines: list[int] = []
    rows: list[dict[str, Any]] = []
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = next(reader, None) or []
        start = reader.line_num + 1
        for cells in reader:
            if cells and len(cells) != len(header):
                raise ResultsError(
                    f"{path}:{start}: {len(cells)} cells where the header has {len(header)}; quote a "
                    'cell that holds a comma ("a,b"), and give every row the header\'s columns'
                )
            if cells:
                lines.append(start)
                rows.append(dict(zip(header, cells, strict=True)))
            start = reader.line_num + 1
    return lines, rows


def numbered_jsonl_rows(path: Path) -> Numbered:
    """A JSON Lines file's objects with their line numbers, refused naming the line that is not one."""
    lines: list[int] = []
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResultsError(f"{path}:{number}: not JSON ({exc.msg}); one JSON object per line") from None
        if not isinstance(row, dict):
            raise ResultsError(f"{path}:{number}: a JSON object per line, got {type(row).__name__}")
        lines.append(number)
        rows.append(row)
    return lines, rows


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
    numbered = (
        numbered_jsonl_rows(path) if path.suffix.lower() in (".jsonl", ".ndjson") else numbered_csv_rows(path)
    )
    rows = numbered[1]
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


def _run_of(path: Path, source: str, numbered: Numbered, options: ReadOptions) -> ImportedRun:
    reward, (lines, rows) = options.scorer, numbered
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
        separator = next((c for c in ";\t|" if len(names) == 1 and c in names[0]), None)
        if separator is not None:  # a spreadsheet saved with its locale's separator
            way = (
                f"its header is separated by {separator!r}, not commas: save it comma-separated (or as JSONL)"
            )
        raise ResultsError(f"{path}: no {missing} among its columns {names}; {way}{alone if prefs else ''}")
    trial_col, error_col = column(names, TRIAL_COLUMNS), column(names, ("error",))
    seed_col, cluster_col = column(names, ("seed",)), column(names, ("cluster",))
    outcomes: list[Outcome] = []
    positions: Counter[str] = Counter()
    for line, row in zip(lines, rows, strict=True):
        where = f"{path}:{line}"
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
                line=line,
            )
        )
    notes = [] if trial_col else ["no trial column: a task's rows are its trials, in file order"]
    return made_run(path, source, options.label, outcomes, notes)
