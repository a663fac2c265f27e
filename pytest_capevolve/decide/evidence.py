"""From persisted rollout records to the arrays the statistics read.

Pure: takes records (plain dicts) and returns numpy arrays. Missing trials and infra errors
become ``nan`` — missing data, never a 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np


def index_records(
    records: Iterable[dict[str, Any]],
) -> dict[str, dict[tuple[str, int], dict[str, Any]]]:
    """tag → (task_id, trial) → record."""
    by_tag: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
    for record in records:
        by_tag.setdefault(record["tag"], {})[(record["task_id"], int(record["trial"]))] = record
    return by_tag


def _matrix(
    arm: dict[tuple[str, int], dict[str, Any]],
    task_ids: Sequence[str],
    num_trials: int,
    field: str,
) -> np.ndarray:
    matrix = np.full((len(task_ids), num_trials), np.nan)
    for i, task_id in enumerate(task_ids):
        for k in range(num_trials):
            record = arm.get((task_id, k))
            if record is not None and record.get("infra_error") is None:
                value = record.get(field)
                if value is not None:
                    matrix[i, k] = float(value)
    return matrix


def reward_matrix(
    arm: dict[tuple[str, int], dict[str, Any]], task_ids: Sequence[str], num_trials: int
) -> np.ndarray:
    return _matrix(arm, task_ids, num_trials, "reward")


def pass_matrix(
    arm: dict[tuple[str, int], dict[str, Any]], task_ids: Sequence[str], num_trials: int
) -> np.ndarray:
    return _matrix(arm, task_ids, num_trials, "passed")


def infra_count(arm: dict[tuple[str, int], dict[str, Any]], task_ids: Sequence[str], num_trials: int) -> int:
    wanted = set(task_ids)
    return sum(
        1
        for (task_id, k), record in arm.items()
        if task_id in wanted and k < num_trials and record.get("infra_error") is not None
    )
