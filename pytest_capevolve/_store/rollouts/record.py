"""The rollout record: one rollout's plain-JSON account, the same type everywhere.

Built on the worker, shipped in the test report (the ``capevolve_rollout`` user property),
persisted and read back. A schema version this code does not know is refused, never guessed."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from ..._project.adapter import MAX_COST_USD
from ..._project.blocks import block_of
from ...exitcodes import CapevolveError

SCHEMA_VERSION = 1
RECORD_PROPERTY = "capevolve_rollout"


class RecordError(CapevolveError, ValueError):
    """A rollout record cannot be read; ``newer``: written by a newer version (never quarantined)."""

    newer: bool = False


@dataclass(frozen=True)
class RolloutRecord:
    """``reward`` is None exactly when ``infra_error`` is set: missing data, never a 0."""

    run_id: str
    split: str
    task_id: str
    tag: str
    trial: int
    seed: int
    candidate_hash: str
    input: Any = None
    reward: float | None = None
    passed: bool | None = None
    infra_error: str | None = None
    feedback: str = ""
    metrics: Any = None
    output: Any = None
    trace: Any = None
    cost_usd: float = 0.0
    tokens: int = 0
    seconds: float = 0.0
    schema: int = SCHEMA_VERSION
    # a stochastic scorer's re-scores ({"rewards": [...], "seeds": [...]}; reward is their
    # mean); absent from the JSON when None, so other adapters' records are as they were
    judge: Any = None
    # the boundary the candidate's code ran in (:class:`..._confine.landlock.Confinement`'s label,
    # said by its sandbox child before that code ran); absent when None (it ran in the scoring
    # process, or the record predates the boundary)
    confinement: str | None = None

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.split, self.task_id, self.tag, self.trial)

    @property
    def block(self) -> int:
        """The replicate block, from the trial index (see :mod:`..project.blocks`)."""
        return block_of(self.trial)

    @property
    def valid(self) -> bool:
        return self.infra_error is None and self.reward is not None

    def to_json(self) -> dict[str, Any]:
        return _without_unset(dataclasses.asdict(self))

    def dumps(self) -> str:
        """Compact, key-sorted JSON for the report; once per rollout on the hot path, so no deep copy."""
        return _ENCODER.encode(_without_unset({name: getattr(self, name) for name in _NAMES}))

    @classmethod
    def from_json(cls, data: Any, where: str = "rollout record") -> RolloutRecord:
        if not isinstance(data, dict):
            raise RecordError(f"{where}: a rollout record is a JSON object, got {type(data).__name__}")
        version = data.get("schema")
        if version != SCHEMA_VERSION:
            error = RecordError(
                f"{where}: rollout record schema {version!r} is not one this pytest-capevolve reads "
                f"(it reads schema {SCHEMA_VERSION}); upgrade pytest-capevolve, or start a new run"
            )
            error.newer = type(version) is int and version > SCHEMA_VERSION
            raise error
        missing = [name for name in _REQUIRED if name not in data]
        if missing:
            raise RecordError(f"{where}: rollout record lacks {', '.join(missing)}")
        try:
            record = cls(**{k: v for k, v in data.items() if k in _KNOWN})
            object.__setattr__(record, "trial", int(record.trial))
        except (TypeError, ValueError) as exc:
            raise RecordError(f"{where}: unreadable rollout record: {exc}") from None
        _check_numbers(record, where)
        return record

    @classmethod
    def loads(cls, text: str, where: str = "rollout record") -> RolloutRecord:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise RecordError(f"{where}: not JSON: {exc}") from None
        return cls.from_json(data, where)


def _without_unset(fields: dict[str, Any]) -> dict[str, Any]:
    for optional in _OPTIONAL:
        if fields[optional] is None:
            del fields[optional]
    return fields


def _number(value: Any, high: float) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0.0 <= value <= high


def _check_numbers(record: RolloutRecord, where: str) -> None:
    """Refuse a reward outside [0, 1] or a cost outside [0, max], so a damaged file is never summed."""
    reward, cost = record.reward, record.cost_usd
    if reward is not None and not _number(reward, 1.0):
        raise RecordError(f"{where}: reward {reward!r} is not a number in [0, 1]")
    if not _number(cost, MAX_COST_USD):
        raise RecordError(f"{where}: cost_usd {cost!r} is not a number in [0, {MAX_COST_USD:g}]")
    if record.judge is not None:
        _check_judge(record, where)


def _check_judge(record: RolloutRecord, where: str) -> None:
    """A stochastic scorer's re-scores: rewards in [0, 1], one seed each, their mean the reward, so an
    edited ``judge`` cannot tell a story the reward does not."""
    judge = record.judge
    rewards = judge.get("rewards") if isinstance(judge, dict) else None
    seeds = judge.get("seeds") if isinstance(judge, dict) else None
    numbers = isinstance(rewards, list) and all(_number(r, 1.0) for r in rewards)
    if not numbers or not rewards or not isinstance(seeds, list) or len(seeds) != len(rewards):
        raise RecordError(f"{where}: judge {judge!r} is not r rewards in [0, 1] with their r seeds")
    if record.reward is None or not math.isclose(sum(rewards) / len(rewards), record.reward, abs_tol=1e-12):
        raise RecordError(
            f"{where}: reward {record.reward!r} is not the mean of its judge re-scores {rewards}"
        )


_FIELDS = dataclasses.fields(RolloutRecord)
_NAMES = tuple(f.name for f in _FIELDS)
_KNOWN = frozenset(_NAMES)
_OPTIONAL = ("judge", "confinement")  # left out of the JSON when None: records as they were
_REQUIRED = [f.name for f in _FIELDS if f.default is dataclasses.MISSING]
# json.dumps(..., sort_keys=True) builds a new encoder per call; the same settings, built once
_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


# The last record decoded (or built) and its JSON: one slot, replaced whole, so a reader on
# another thread sees a consistent pair; every hook reading the same report shares one decode.
_last_decoded: tuple[str, RolloutRecord] | None = None


def remember_decoded(text: str, record: RolloutRecord) -> None:
    global _last_decoded
    _last_decoded = (text, record)


def decode_record(text: str, where: Any) -> RolloutRecord:
    """``RolloutRecord.loads(text)``, cached for the last ``text``."""
    last = _last_decoded
    if last is not None and (last[0] is text or last[0] == text):
        return last[1]
    try:
        record = RolloutRecord.loads(text)
    except RecordError:  # again, to name the report in the error
        RolloutRecord.loads(text, f"report of {where.nodeid}")
        raise
    remember_decoded(text, record)
    return record


def record_from_report(report: Any) -> RolloutRecord | None:
    text = record_text(report)
    return None if text is None else decode_record(text, report)


def record_text(report: Any) -> str | None:
    """The record's compact JSON as shipped (the controller writes the file from it)."""
    for name, value in getattr(report, "user_properties", ()):
        if name == RECORD_PROPERTY:
            return str(value)
    return None
