"""What every reader returns: a finished run as its outcomes, one per (task, trial); a reward of
None is missing data (the tool logged an error), never a 0."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ResultsError(ValueError):
    """A results file that cannot be read as asked: one line naming the file, what is wrong,
    and a way on (``capevolve compare`` exits 4 with it)."""


@dataclass(frozen=True)
class ReadOptions:
    """What a command line may say about one file (``arm``: of a promptfoo file that holds several)."""

    label: str | None = None
    scorer: str | None = None
    arm: str | None = None


@dataclass(frozen=True, slots=True)  # a million of them in a big table: no __dict__ each
class Outcome:
    """One (task, trial) of a finished run: ``trial`` the file's own label of the repeat,
    ``seed`` the trial's random seed, ``cluster`` its group of dependent tasks (None: not given)."""

    task_id: str
    trial: str | None
    reward: float | None
    error: str | None = None
    seed: str | None = None
    cluster: str | None = None  # the task's cluster (tasks that share a source), where given
    # what the task is, where the file records it (lm-eval's doc_hash, inspect's input and target,
    # deepeval's input and expected output): a task id paired with another content is refused
    content: str | None = None
    line: int | None = None  # the file's line it was read from, where a reader knows it


@dataclass(frozen=True)
class ImportedRun:
    """A finished run read from ``path`` by the reader ``source``; ``label`` names it in the
    tables (the file name unless given); ``notes`` say what the reader assumed."""

    path: Path
    source: str
    label: str
    outcomes: tuple[Outcome, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def task_ids(self) -> list[str]:
        """Its tasks in the order the file first names them."""
        return list(dict.fromkeys(o.task_id for o in self.outcomes))

    @property
    def infra_errors(self) -> int:
        return sum(o.reward is None for o in self.outcomes)


# the way on from a score outside [0, 1] in another tool's file, which cannot be rescaled in place
LOG_RESCALE = (
    "name a score in [0, 1] with --scorer, or export the file as a CSV of task_id, trial, reward "
    "with the scores rescaled to [0, 1]"
)


# a pass/fail cell as Python's csv module and pandas write a bool: read as JSON's true/false are
BOOLEAN_WORDS = {"true": 1.0, "false": 0.0}


def checked_reward(value: object, where: str, rescale: str = "rescale the scores to [0, 1] first") -> float:
    """A reward as the gate reads one: a finite number in [0, 1], never clamped; anything else
    is refused naming ``where`` (the file and the row) and ``rescale``, the way on."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, str) and value.strip().lower() in BOOLEAN_WORDS:
        return BOOLEAN_WORDS[value.strip().lower()]
    try:
        if not isinstance(value, int | float | str):
            raise ValueError
        reward = float(value)  # a string reads with any spaces around its number
    except ValueError:
        raise ResultsError(f"{where}: reward {value!r} is not a number; give a number in [0, 1]") from None
    if not math.isfinite(reward) or not 0.0 <= reward <= 1.0:
        raise ResultsError(
            f"{where}: reward {value!r} is outside [0, 1]; {rescale} "
            "(the gate reads rewards in [0, 1] only, never clamped)"
        )
    return reward


def json_document(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: not JSON ({exc}); a results file in JSON must parse") from None


def made_run(
    path: Path, source: str, label: str | None, outcomes: list[Outcome], notes: list[str]
) -> ImportedRun:
    """The run, refused when it is empty or names one (task, trial) twice."""
    if not outcomes:
        raise ResultsError(f"{path}: no results found in it ({source}); is it the right file?")
    seen: dict[tuple[str, str], Outcome] = {}
    for outcome in outcomes:
        if outcome.trial is None:
            continue
        key = (outcome.task_id, outcome.trial)
        if key in seen:
            where = f"{path}:{outcome.line}" if outcome.line else str(path)
            first = f" (first on line {seen[key].line})" if seen[key].line else ""
            raise ResultsError(
                f"{where}: task {outcome.task_id!r} has trial {outcome.trial!r} twice{first}; each "
                "(task, trial) once — give repeats distinct trial numbers"
            )
        seen[key] = outcome
    return ImportedRun(path, source, label or path.name, tuple(outcomes), tuple(notes))
