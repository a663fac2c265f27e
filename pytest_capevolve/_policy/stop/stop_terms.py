"""The vocabulary of a stop condition: the predicate kinds, their units, and what a clause reads as. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Predicate kinds. "role" says what a met predicate means: a stop signal, or a guard that holds.
VAL_MEAN = "val_mean"  # goal: the best's full-val mean reaches a number
USD = "usd"  # cap: dollars spent (runner + optimizer)
SECONDS = "seconds"  # cap: wall clock since the run's first event
ROLLOUTS = "rollouts"  # cap: rollouts paid (metric calls)
ITERATIONS = "iterations"  # cap: decisions booked
STALL = "stall"  # cap: rejects in a row
NO_REGRESS = "no_regress"  # guard: a named task must not get worse than in the seed
UNITS = {
    VAL_MEAN: "mean reward", USD: "USD", SECONDS: "seconds", ROLLOUTS: "rollouts", ITERATIONS: "iterations",
    STALL: "rejects in a row", NO_REGRESS: "task mean",
}  # fmt: skip


@dataclass(frozen=True)
class Predicate:
    """One readable clause: ``kind`` with its ``number`` (for ``no_regress``: the ``task``)."""

    kind: str
    number: float | None
    clause: str
    op: str = ">="  # stop (or, for a guard, hold) when actual ``op`` number
    split: str | None = None  # val_mean: always "val"
    task: str | None = None  # no_regress: the task id

    @property
    def role(self) -> str:
        return "guard" if self.kind == NO_REGRESS else ("goal" if self.kind == VAL_MEAN else "cap")

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v is not None}
        out["role"] = self.role
        out["unit"] = UNITS[self.kind]
        return out


@dataclass(frozen=True)
class Ambiguity:
    """A clause the grammar could not read, and why (what to write instead)."""

    clause: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
