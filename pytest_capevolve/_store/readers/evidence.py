"""From rollout records to the arrays the statistics read.

Records or columns in, numpy arrays out, pure but for the log's readers at the end. Missing trials
and infra errors become ``nan`` — missing data, never a 0. The first outcome the log recorded for a
rollout stands (:func:`first_outcomes`): deleting the files of a candidate's failures made a
non-reproducing adapter redraw exactly those, and a no-op was accepted after a few rounds. A redraw
after an infra error is a draw candidate code can choose, so :func:`redrawn_after_errors` names
those keys for the error check's worst case."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, reduce
from itertools import repeat
from operator import is_not
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._project.blocks import block_of, local_trial
from ..._project.splits import TEST_SPLIT
from ...exitcodes import first_few
from ..log import paid_by
from ..log.event_kinds import ROLLOUT, SCREEN
from ..log.outcome_ledger import Key, outcome, rollout_key
from ..log.sealed_summary import SUMMARY_NAME

if TYPE_CHECKING:
    from ..rollouts.record import RolloutRecord
    from ..rundir import RunDir

Arm = dict[tuple[str, int], "RolloutRecord"]  # (task_id, trial) → record
ByTag = dict[str, Arm]


def index_records(records: Iterable[RolloutRecord], block: int = 0) -> ByTag:
    """tag → (task_id, trial within the block) → record, for replicate block ``block`` only."""
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


@dataclass(frozen=True)
class Cells:
    """One arm's records as task × trial arrays; ``rows`` maps each planned task id to its row. Built
    once per tag, so a best gated against many candidates is read once."""

    present: np.ndarray
    infra: np.ndarray
    reward: np.ndarray
    rows: np.ndarray


def cells(arm: Arm, task_ids: Sequence[str], num_trials: int) -> Cells:
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
    """The two arms cut to the cells both have (a paired comparison reads the same seeds), then each
    side's reward matrix and infra count, and the trials."""
    shared = a.present & b.present
    used = np.flatnonzero(shared.any(axis=0))
    width = int(used[-1]) + 1 if used.size else num_trials
    both = shared[:, :width]
    matrices = [np.where(both, side.reward[:, :width], np.nan)[side.rows] for side in (a, b)]
    infra = [int(np.count_nonzero(both & side.infra[:, :width])) for side in (a, b)]  # per record
    return matrices[0], matrices[1], width, infra[0], infra[1]


@dataclass(frozen=True)
class Outcomes:
    """One replicate block's rollouts as parallel columns (no record each); :meth:`arm_arrays`
    answers what the record functions answer, to the bit."""

    tag: Sequence[str]
    task_id: Sequence[str]
    trial: Sequence[int]
    reward: Sequence[float | None]
    passed: Sequence[bool | int | None]
    infra_error: Sequence[str | None]
    cost_usd: Sequence[float]

    @classmethod
    def of_arms(cls, by_tag: ByTag) -> Outcomes:
        rows = [
            (tag, task_id, k, r.reward, r.passed, r.infra_error, r.cost_usd)
            for tag, arm in by_tag.items()
            for (task_id, k), r in arm.items()
        ]
        return (
            cls(*(list(column) for column in zip(*rows, strict=True)))
            if rows
            else cls(*([] for _ in range(7)))
        )

    @cached_property
    def _arrays(self) -> tuple[np.ndarray, ...]:
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
        """Each rollout's row among ``task_ids`` (-1: not one), kept for the last list asked."""
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
        """The tag's reward and pass matrices (nan unless valid), infra errors and cost."""
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
    """The val rollouts held for each tag a ``screen`` event names."""
    tags = sorted({str(e.get("tag")) for e in events if e.get("kind") == SCREEN})
    return {tag: len(rundir.rollouts.indexed_rollouts("val", [tag])) for tag in tags}


def redrawn_after_errors(rundir: RunDir) -> set[Key]:
    """The keys whose first logged attempt was an infra error and were paid again."""
    errored: set[Key] = set()
    redrawn: set[Key] = set()
    for event in rundir.log.of_kinds(ROLLOUT):
        if event.get("split") == TEST_SPLIT:
            continue
        key = rollout_key(event)
        if event.get("infra_error") or event.get("reward") is None:
            errored.add(key)
        elif key in errored:
            redrawn.add(key)
    return redrawn


def first_errors(rundir: RunDir, split: str) -> set[Key]:
    """The keys of ``split`` whose first logged attempt was an infra error, paid again or not."""
    seen: set[Key] = set()
    errored: set[Key] = set()
    for event in rundir.log.of_kinds(ROLLOUT):
        if event.get("split") != split:
            continue
        key = rollout_key(event)
        if key not in seen and (event.get("infra_error") or event.get("reward") is None):
            errored.add(key)
        seen.add(key)
    return errored


def first_outcomes(rundir: RunDir, by_tag: ByTag, threshold: float) -> tuple[ByTag, dict[str, int]]:
    """``by_tag`` with each valid reward the log's first for its key, and per tag how many were paid again.

    Each record is held to the log's own rollout events first: its outcome (reward, infra error, cost)
    must be one a rollout event of its key logged. The records come from the index or the sealed
    summary, trusted on a checkpoint (``outcomes_checked``, ``rollouts_summarized``) that an unconfined
    writer can forge with them, rewriting the log's tail or appending through the API; a checkpoint
    speeds a resume, but a decision never takes rows on its word (:class:`UnloggedRows`)."""
    # each key's first logged (reward, infra error, cost) as its event says it, and a key's later ones
    logged: dict[Key, Said] = {}
    later: dict[Key, list[Said]] = {}
    events = rundir.log.of_kinds(*paid_by.KINDS)
    # a rollout no session's claim paid, or a key paid twice, is refused before it is read
    paid_by.refuse_untrusted(events, rundir.run_id, rundir.rollout_file)
    for event in events:
        if event.get("kind") == ROLLOUT and event.get("split") != TEST_SPLIT:
            said = (event.get("reward"), event.get("infra_error"), event.get("cost_usd"))
            if logged.setdefault(key := rollout_key(event), said) is not said:
                later.setdefault(key, []).append(said)
    held: ByTag = {}
    repaid: dict[str, int] = {}
    unlogged: list[str] = []
    for tag, arm in by_tag.items():
        repaid[tag] = 0
        held[tag] = {}
        for cell, record in arm.items():
            key = (record.split, record.tag, record.task_id, record.trial)
            said = (record.reward, record.infra_error, record.cost_usd)
            first, more = logged.get(key), later.get(key)
            if first != said and not _logged_as(said, first, more):
                unlogged.append(_unlogged(key, said, first))
                continue
            valid = [one[0] for one in (first, *(more or ())) if one is not None and _valid(one)]
            repaid[tag] += max(0, len(valid) - 1)
            if record.valid and valid and float(valid[0]) != record.reward:
                reward = float(valid[0])
                record = replace(record, reward=reward, passed=reward >= threshold)
            held[tag][cell] = record
    if unlogged:
        raise UnloggedRows(
            f"run {rundir.run_id}: {len(unlogged)} rollout row(s) a decision would read are not an outcome "
            f"the log's rollout events recorded ({first_few(unlogged)}): index.sqlite or "
            f"{SUMMARY_NAME} edited, with the checkpoint it was trusted on. Nothing is decided on them: "
            f"`capevolve verify` names every one; delete index.sqlite and {SUMMARY_NAME} (caches: the "
            "next session builds them again from the rollout files, each held to the log), or start a "
            "new run (--capevolve-new-run)"
        )
    return held, repaid


Said = tuple[Any, Any, Any]  # (reward, infra error, cost) as a rollout event or a record says them


def _valid(said: Said) -> bool:
    return not said[1] and said[0] is not None


def _logged_as(said: Said, first: Said | None, later: list[Said] | None) -> bool:
    """Whether a rollout event of the key logged ``said``, as :func:`outcome` compares them."""
    wanted = outcome(*said)
    return any(outcome(*one) == wanted for one in (first, *(later or ())) if one is not None)


def _unlogged(key: Key, said: Said, logged: Said | None) -> str:
    split, tag, task_id, trial = key
    row = outcome(*said)
    shown = (
        f"{split} {task_id} {tag} t{trial} says reward {row[0]!r}, infra error {row[1]!r}, cost {row[2]!r}"
    )
    if logged is None:
        return f"{shown}, and no rollout event records it"
    was = outcome(*logged)
    return f"{shown}; its rollout event logged reward {was[0]!r}, infra error {was[1]!r}, cost {was[2]!r}"


class UnloggedRows(paid_by.UntrustedRecord):
    """Rows a decision would read (the index's, the sealed summary's) that no rollout event recorded."""


def repaid_details(repaid: dict[str, int], tag: str, against: str) -> dict[str, Any]:
    return {
        "repaid_rollouts": {tag: repaid.get(tag, 0), against: repaid.get(against, 0)},
        "repaid_rule": "a rollout paid again (its file vanished or was quarantined) is decided on "
        "the first valid outcome the log recorded for it",
    }
