"""The spec's free-text ``stop_condition``, read by a fixed grammar — never guessed.

Each clause becomes one :class:`Predicate` or one :class:`Ambiguity` saying why it could not be read: a vague
clause is reported, never made a number. Pure; :func:`parse` never raises."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .stop_terms import NO_REGRESS, VAL_MEAN, Ambiguity, Predicate


@dataclass(frozen=True)
class StopCondition:
    text: str
    clauses: tuple[str, ...] = ()
    predicates: tuple[Predicate, ...] = ()
    ambiguous: tuple[Ambiguity, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "predicates": [p.to_json() for p in self.predicates],
            "ambiguous": [a.to_json() for a in self.ambiguous],
        }


@dataclass(frozen=True)
class Actuals:
    """What has been measured: ``val_mean`` over the val tasks with data, ``val_full`` whether that is
    every task (a goal is met only on full val), ``task_means``: id → (best's, seed's mean)."""

    val_mean: float | None = None
    val_full: bool = False
    usd: float = 0.0
    seconds: float = 0.0
    rollouts: int = 0
    iterations: int = 0
    stall: int = 0
    task_means: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    val_task_ids: tuple[str, ...] | None = None  # when given, a guard on another task says so


# "whichever comes first" and friends join clauses; they are not a condition of their own.
_FILLER = re.compile(
    r"\bwhichever\s+(?:one\s+)?(?:comes|happens|is\s+reached|occurs|is)\s+(?:first|sooner|earlier)\b",
    re.IGNORECASE,
)
# Commas split, except the thousands separator in 1,000; "or"/"and" split as whole words.
_SPLIT = re.compile(r"[;\n\r]|(?<![0-9]),|,(?![0-9]{3}(?![0-9]))|\b(?:or|and)\b|&", re.IGNORECASE)


_EDGES = re.compile(r"^[\s!?:\-]+|[\s.!?:\-]+$")  # a leading "." may start a number (.5)


def _normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    for old, new in (("≥", ">="), ("⩾", ">="), ("≤", "<="), ("⩽", "<="), ("’", "'"), ("‘", "'")):
        text = text.replace(old, new)
    return text


def split_clauses(text: str | None) -> list[str]:
    if not text:
        return []
    cleaned = _FILLER.sub(" ", _normalize(text))
    parts = (_EDGES.sub("", part) for part in _SPLIT.split(cleaned))
    return [part for part in parts if part]


def parse(text: str | None) -> StopCondition:
    """Read a stop condition; never raises. Each clause yields one predicate or one ambiguity, in order."""
    if text is None:
        return StopCondition(text="")
    text = str(text)
    clauses = split_clauses(text)
    predicates: list[Predicate] = []
    ambiguous: list[Ambiguity] = []
    if clauses:  # its regexes compile on import: 12 ms of every session's start, most have no condition
        from .stop_grammar import read_clause
    for clause in clauses:
        try:
            result = read_clause(clause)
        except Exception as exc:  # a bug here must not hide a clause: report it, never guess
            result = Ambiguity(clause, f"unreadable ({type(exc).__name__})")
        (predicates if isinstance(result, Predicate) else ambiguous).append(result)  # type: ignore[arg-type]
    return StopCondition(text, tuple(clauses), tuple(predicates), tuple(ambiguous))


def _compare(actual: float, op: str, number: float) -> bool:
    return actual > number if op == ">" else actual >= number


def evaluate(condition: StopCondition, actuals: Actuals) -> list[dict[str, Any]]:
    """Each predicate with its measured ``actual`` and ``met``; without data, unmet with a note."""
    out = []
    for p in condition.predicates:
        row = p.to_json()
        note = None
        if p.kind == VAL_MEAN:
            actual: Any = actuals.val_mean
            met = bool(
                actual is not None and actuals.val_full and _compare(actual, p.op, float(p.number or 0))
            )
            if actual is None:
                note = "the best has no val rollout yet"
            elif not actuals.val_full:
                note = "the best is not evaluated on every val task: a goal counts only on full val"
        elif p.kind == NO_REGRESS:
            best, seed = actuals.task_means.get(p.task or "", (None, None))
            actual = {"best": best, "seed": seed}
            met = best is not None and seed is not None and best >= seed
            if actuals.val_task_ids is not None and p.task not in actuals.val_task_ids:
                note = f"task {p.task!r} is not a val task: a guard is checked on val, so it is unmeasured"
            elif best is None or seed is None:
                note = f"task {p.task!r} has no valid val rollout of both the best and the seed: unmeasured"
        else:  # a cap: its kind names the field of Actuals it counts
            actual = getattr(actuals, p.kind)
            met = _compare(float(actual), p.op, float(p.number or 0))
        row.update(actual=actual, met=met)
        if note:
            row["note"] = note
        out.append(row)
    return out
