"""From rollout records to the arrays the statistics read.

Pure: takes records (:class:`~pytest_capevolve._store.record.RolloutRecord`, read by attribute),
or the same outcomes as columns (:class:`Outcomes`, for a session's table of 60,000 rollouts),
and returns numpy arrays. Missing trials and infra errors become ``nan`` — missing data, never
a 0.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, reduce
from itertools import repeat
from operator import is_not
from typing import TYPE_CHECKING, Any

import numpy as np

from .._project.blocks import block_of, local_trial
from .event_kinds import SCREEN

if TYPE_CHECKING:
    from .record import RolloutRecord
    from .rundir import RunDir

Arm = dict[tuple[str, int], "RolloutRecord"]  # (task_id, trial) → record
ByTag = dict[str, Arm]


def index_records(records: Iterable[RolloutRecord], block: int = 0) -> ByTag:
    """tag → (task_id, trial within the block) → record, for replicate block ``block`` only
    (default 0: the block every decision reads; other blocks' records are left out)."""
    by_tag: ByTag = {}
    for record in records:
        if block_of(record.trial) == block:
            by_tag.setdefault(record.tag, {})[(record.task_id, local_trial(record.trial))] = record
    return by_tag


def reward_matrix(arm: Arm, task_ids: Sequence[str], num_trials: int) -> np.ndarray:
    matrix = np.full((len(task_ids), num_trials), np.nan)
    for i, task_id in enumerate(task_ids):
        for k in range(num_trials):
            record = arm.get((task_id, k))
            if record is not None and record.valid and record.reward is not None:
                matrix[i, k] = record.reward
    return matrix


def in_plan(arm: Arm, task_ids: Sequence[str], num_trials: int) -> list[RolloutRecord]:
    """The arm's records for these tasks and the first ``num_trials`` trials."""
    wanted = set(task_ids)
    return [r for (task_id, k), r in arm.items() if task_id in wanted and k < num_trials]


def infra_count(arm: Arm, task_ids: Sequence[str], num_trials: int) -> int:
    return sum(1 for r in in_plan(arm, task_ids, num_trials) if r.infra_error is not None)


def shared_arms(a: Arm, b: Arm, task_ids: Sequence[str], num_trials: int) -> tuple[Arm, Arm, int]:
    """The two arms cut to the (task, trial) cells **both** have a record for (valid or an infra
    error), and the trials that leaves: a paired comparison reads the same trial seeds on both
    sides. A null control gated at 5 trials is compared with a best grown to 15 on t0–t4 only,
    never its 5-trial mean against the best's 15-trial mean."""
    wanted = set(task_ids)
    cells = {c for c in a.keys() & b.keys() if c[0] in wanted and c[1] < num_trials}
    trials = max((k for _, k in cells), default=-1) + 1
    return {c: a[c] for c in cells}, {c: b[c] for c in cells}, trials


@dataclass(frozen=True)
class Cells:
    """One arm's records laid out as task × trial arrays, one row per distinct task: which cells
    have a record, which of those are infra errors, and the reward (nan unless valid); ``rows``
    maps each of the plan's task ids (repeats included) to its row. Built once per tag, so
    gating many candidates against one best reads its records once."""

    present: np.ndarray
    infra: np.ndarray
    reward: np.ndarray
    rows: np.ndarray


def cells(arm: Arm, task_ids: Sequence[str], num_trials: int) -> Cells:
    """The arm's records for these tasks and the first ``num_trials`` trials, as :class:`Cells`."""
    row_of = {task_id: i for i, task_id in enumerate(dict.fromkeys(task_ids))}
    rows: list[int] = []
    cols: list[int] = []
    flagged: list[bool] = []
    rewards: list[float] = []
    for (task_id, k), record in arm.items():
        i = row_of.get(task_id)
        if i is None or not 0 <= k < num_trials:
            continue
        rows.append(i)
        cols.append(k)
        flagged.append(record.infra_error is not None)
        rewards.append(float(record.reward) if record.valid else np.nan)  # type: ignore[arg-type]  # valid: a float
    shape = (len(row_of), num_trials)
    present, infra, reward = np.zeros(shape, bool), np.zeros(shape, bool), np.full(shape, np.nan)
    present[rows, cols] = True
    infra[rows, cols] = flagged
    reward[rows, cols] = rewards
    return Cells(present, infra, reward, np.array([row_of[t] for t in task_ids], dtype=np.intp))


def shared_matrices(a: Cells, b: Cells, num_trials: int) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """:func:`shared_arms` then :func:`reward_matrix` and :func:`infra_count` of each side, from
    cells of the same plan: (a's matrix, b's matrix, trials, a's infra errors, b's infra
    errors). With no cell shared, ``num_trials`` all-missing trials (the verdict then says no
    task is valid)."""
    shared = a.present & b.present
    used = np.flatnonzero(shared.any(axis=0))
    width = int(used[-1]) + 1 if used.size else num_trials
    both = shared[:, :width]
    matrices = [np.where(both, side.reward[:, :width], np.nan)[side.rows] for side in (a, b)]
    infra = [int(np.count_nonzero(both & side.infra[:, :width])) for side in (a, b)]  # per record
    return matrices[0], matrices[1], width, infra[0], infra[1]


@dataclass(frozen=True)
class Outcomes:
    """One replicate block's rollouts as parallel columns, one entry per rollout in the order
    read (the trial within the block): what a session's table needs of 60,000 rollouts without
    a record object for each. :meth:`arm_arrays` answers what :func:`reward_matrix`,
    :func:`infra_count` and the cost of :func:`in_plan` answer from an arm
    of :func:`index_records`, to the bit."""

    tag: Sequence[str]
    task_id: Sequence[str]
    trial: Sequence[int]
    reward: Sequence[float | None]
    passed: Sequence[bool | int | None]
    infra_error: Sequence[str | None]
    cost_usd: Sequence[float]

    @classmethod
    def of_arms(cls, by_tag: ByTag) -> Outcomes:
        """The columns of arms already indexed (:func:`index_records`), in their order."""
        cells = [(tag, task_id, k, r) for tag, arm in by_tag.items() for (task_id, k), r in arm.items()]
        records = [r for *_, r in cells]
        return cls(
            [c[0] for c in cells],
            [c[1] for c in cells],
            [c[2] for c in cells],
            [r.reward for r in records],
            [r.passed for r in records],
            [r.infra_error for r in records],
            [r.cost_usd for r in records],
        )

    @cached_property
    def _arrays(self) -> tuple[np.ndarray, ...]:
        """The columns as arrays, made once for every arm: tag, trial, infra error?, reward?
        (not None), reward (nan for None), passed (nan for None)."""
        n = len(self.tag)
        return (
            np.array(self.tag, dtype=object),
            np.fromiter(self.trial, np.int64, n),
            np.fromiter(map(is_not, self.infra_error, repeat(None)), bool, n),
            np.fromiter(map(is_not, self.reward, repeat(None)), bool, n),
            np.array(self.reward, dtype=float).reshape(n),
            np.array(self.passed, dtype=float).reshape(n),
        )

    def _rows(self, task_ids: Sequence[str]) -> np.ndarray:
        """Each rollout's row among ``task_ids`` (-1: not one of them; a task listed twice: its
        last row, as a dict of task ids keeps it). Kept for the last task list asked."""
        key = tuple(task_ids)
        cached = self.__dict__.get("_rows_of")
        if cached is None or cached[0] != key:
            rows_of = {task_id: i for i, task_id in enumerate(task_ids)}
            rows = np.fromiter(map(rows_of.get, self.task_id, repeat(-1)), np.intp, len(self.task_id))
            cached = self.__dict__["_rows_of"] = (key, rows)
        return cached[1]

    def arm_arrays(
        self, tag: str, task_ids: Sequence[str], num_trials: int
    ) -> tuple[np.ndarray, np.ndarray, int, float]:
        """The tag's reward and pass matrices (tasks × trials, nan unless valid), its infra
        errors and its cost, over its rollouts of these tasks and the first ``num_trials`` trials."""
        rewards = np.full((len(task_ids), num_trials), np.nan)
        passes = np.full((len(task_ids), num_trials), np.nan)
        if not len(self.tag):
            return rewards, passes, 0, 0.0
        tags, trial, infra, has_reward, reward, passed = self._arrays
        row = self._rows(task_ids)
        kept = np.flatnonzero((tags == tag) & (row >= 0) & (trial < num_trials))  # in the arm's order
        measured = kept[~infra[kept] & has_reward[kept]]
        rewards[row[measured], trial[measured]] = reward[measured]
        passes[row[measured], trial[measured]] = passed[measured]
        # added one by one in the arm's order, as a loop over its records adds them (a numpy sum
        # pairs them, and can differ in the last bit)
        cost = reduce(operator.add, map(self.cost_usd.__getitem__, kept.tolist()), 0.0)
        return rewards, passes, int(np.count_nonzero(infra[kept])), cost


def val_paid_by_tag(rundir: RunDir, events: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The val rollouts the run holds for each tag a ``screen`` event names: what the screen
    ledger checks a kill's saving against (a killed candidate evaluated on full val later
    saved nothing)."""
    tags = sorted({str(e.get("tag")) for e in events if e.get("kind") == SCREEN})
    return {tag: len(rundir.rollouts.indexed_rollouts("val", [tag])) for tag in tags}
