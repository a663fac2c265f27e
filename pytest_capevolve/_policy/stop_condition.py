"""The spec's free-text ``stop_condition``, read by a fixed grammar — never guessed.

Used by ``capevolve spend`` (and any loop driver) to turn a person's sentence such as
"stop at val mean ≥ 0.8, $5 or 2 hours; never break task n07" into predicates it can check
against measured numbers. The text is cut into clauses (on commas, semicolons, newlines, "or",
"and"); each clause becomes exactly one :class:`Predicate` or one :class:`Ambiguity` naming why
it could not be read (no number, unknown unit, which split?, several conditions at once). A
vague clause ("when it's good enough") is reported, never turned into a number; a target on the
test split is refused, because test is sealed and scored once, after the search.

Pure: strings in, dataclasses out; no I/O. :func:`parse` never raises.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# Predicate kinds. "role" says what a met predicate means: a stop signal, or a guard that holds.
VAL_MEAN = "val_mean"  # goal: the best's full-val mean reaches a number
USD = "usd"  # cap: dollars spent (runner + optimizer)
SECONDS = "seconds"  # cap: wall clock since the run's first event
ROLLOUTS = "rollouts"  # cap: rollouts paid (metric calls)
ITERATIONS = "iterations"  # cap: decisions booked
STALL = "stall"  # cap: rejects in a row
NO_REGRESS = "no_regress"  # guard: a named task must not get worse than in the seed
KINDS = (VAL_MEAN, USD, SECONDS, ROLLOUTS, ITERATIONS, STALL, NO_REGRESS)
CAPS = (USD, SECONDS, ROLLOUTS, ITERATIONS, STALL)

UNITS = {
    VAL_MEAN: "mean reward",
    USD: "USD",
    SECONDS: "seconds",
    ROLLOUTS: "rollouts",
    ITERATIONS: "iterations",
    STALL: "rejects in a row",
    NO_REGRESS: "task mean",
}


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


@dataclass(frozen=True)
class StopCondition:
    """The parsed text: every clause is in exactly one of ``predicates`` or ``ambiguous``."""

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
    """What has been measured, for :func:`evaluate`. ``val_mean`` is the best's mean over the
    val tasks it has data on; ``val_full`` says whether that is every val task (a goal is met
    only on full val). ``task_means``: task id → (best's mean, seed's mean), None when absent."""

    val_mean: float | None = None
    val_full: bool = False
    usd: float = 0.0
    seconds: float = 0.0
    rollouts: int = 0
    iterations: int = 0
    stall: int = 0
    task_means: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    val_task_ids: tuple[str, ...] | None = None  # when given, a guard on another task says so


# -- splitting ------------------------------------------------------------------------------------

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
    """The clauses of a stop condition, stripped, empty ones dropped, in order."""
    if not text:
        return []
    cleaned = _FILLER.sub(" ", _normalize(text))
    parts = (_EDGES.sub("", part) for part in _SPLIT.split(cleaned))
    return [part for part in parts if part]


# -- the grammar ----------------------------------------------------------------------------------

_NUM = r"(?<![\w.])(?P<num>(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)"
_ANY_NUM = re.compile(_NUM)
_END = r"(?![\w])"

_TIME_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip
_ROUND_WORDS = r"(?:iterations?|iters?|rounds?|decisions?|generations?|candidates?|attempts?|tries)"

_USD_PATTERNS = [
    (re.compile(r"(?:us)?\$\s*" + _NUM + r"(?:\s*(?:usd|dollars?))?" + _END), 1.0),
    (re.compile(_NUM + r"\s*(?:usd|us\$|\$|dollars?|bucks)" + _END), 1.0),
    (re.compile(r"\busd\s*" + _NUM + _END), 1.0),
    (re.compile(_NUM + r"\s*(?:cents?|¢)" + _END), 0.01),
]
_OTHER_MONEY = [
    re.compile(r"(?P<unit>[€£¥])\s*" + _NUM),
    re.compile(_NUM + r"\s*(?P<unit>eur|euros?|gbp|pounds?|yen|jpy|chf|francs?|[€£¥])" + _END),
]
_TIME = re.compile(_NUM + r"\s*(?P<unit>" + "|".join(sorted(_TIME_UNITS, key=len, reverse=True)) + ")" + _END)
_ROLLOUTS = [
    re.compile(
        _NUM + r"\s*(?:rollouts?|roll-outs?|metric[\s_-]*calls?|evaluations?|evals?|episodes?)" + _END
    ),
    re.compile(r"(?:rollouts?|metric[\s_-]*calls?)\s*(?:of|at|to|=|:|<=|<)?\s*" + _NUM + _END),
]
_ITERATIONS = [
    re.compile(_NUM + r"\s*(?:iterations?|iters?|rounds?|decisions?|generations?)" + _END),
    re.compile(r"(?:iterations?|rounds?)\s*(?:of|at|to|=|:|<=|<)?\s*" + _NUM + _END),
]
_STALL = [
    re.compile(
        _NUM + r"\s*(?:consecutive\s+)?(?:rejects?|rejections?|rejected\s+candidates?|failed\s+"
        r"(?:attempts?|candidates?)|failures?|non-?improvements?)\s+in\s+a\s+row" + _END
    ),
    re.compile(
        r"\b" + _NUM + r"\s*consecutive\s+(?:rejects?|rejections?|rejected\s+candidates?|failures?|"
        r"failed\s+(?:attempts?|candidates?)|non-?improvements?)" + _END
    ),
    re.compile(
        r"\bstall(?:s|ed|ing)?\s*(?:at|of|after|for|=|:|>=)?\s*"
        + _NUM
        + r"(?:\s*"
        + _ROUND_WORDS
        + r")?"
        + _END
    ),
    re.compile(
        r"\bno\s+(?:more\s+)?(?:improvements?|progress|accepts?|acceptances?|gains?|new\s+best)\s+"
        r"(?:for|in|after|over|within)\s+(?:the\s+last\s+)?" + _NUM + r"(?:\s*" + _ROUND_WORDS + r")?" + _END
    ),
    re.compile(
        _NUM + r"\s*" + _ROUND_WORDS + r"\s+(?:in\s+a\s+row\s+)?without\s+(?:an?\s+|any\s+)?"
        r"(?:improvements?|progress|accepts?|acceptances?|gains?|new\s+best)" + _END
    ),
    re.compile(r"\bplateau(?:s|ed|ing)?\s+(?:for\s+)?" + _NUM + r"(?:\s*" + _ROUND_WORDS + r")?" + _END),
]
_REJECT_TOTAL = re.compile(_NUM + r"\s*(?:rejects?|rejections?|failures?)" + _END)

_NEGATION = re.compile(
    r"\b(?:don't|dont|do\s+not|never|must\s+not|mustn't|should\s+not|shouldn't|no|without|avoid|"
    r"not)\b"
)
_GUARD_VERB = re.compile(r"\b(?:regress\w*|break\w*|broke|broken|hurt\w*|lose|losing|worsen\w*)\b")
_KEEP = re.compile(r"\bkeep\s+(?:the\s+)?tasks?\s+\S+\s+(?:passing|solid|green|working|fixed)\b")
_TASK = re.compile(r"\btasks?\s+[\"'`]?(?P<task>[\w.:/\-]*\w)[\"'`]?")

_PERCENT = r"(?P<pct>\s*(?:%|percent\b|pct\b))?"
_TARGET_NUM = re.compile(_NUM + _PERCENT)
_TARGET_WORDS = re.compile(
    r"(?:\bmean\b|\baverage\b|\bavg\b|\bpass(?:\s|-)?rates?\b|\baccuracy\b|\bscores?\b|\brewards?\b|"
    r"\bsuccess(?:\s+rates?)?\b|\breach\w*|\bhit\w*|\btarget\w*|\bgoal\b|>=|>|\bat\s+least\b|\babove\b|"
    r"\bexceed\w*|\bover\b|\bbeat\w*|\bsolve[sd]?\b|\bpass(?:es|ed)?\b|%|\bpercent\b)"
)
_STRICT = re.compile(r"(?<![<>=])>(?!=)|\babove\b|\bexceed\w*|\bover\b|\bmore\s+than\b|\bbeat\w*")
_SPLIT_WORDS = {
    "val": re.compile(r"\bval(?:idation)?\b|\bdev\s+split\b"),
    "test": re.compile(r"\btest(?:ing)?\b|\bheld[\s-]?out\b|\bholdout\b"),
    "train": re.compile(r"\btrain(?:ing)?\b"),
}

_SEALED = (
    "refused: the test split is sealed — scored once, by finalize, after the search — so it can "
    "never be a stopping signal; set the target on val"
)
_NO_NUMBER = (
    "no number: a stop condition needs a measurable threshold (e.g. 'val mean >= 0.8', '$5', "
    "'2 hours', '1000 rollouts', '10 iterations', '3 rejects in a row')"
)


def _number(match: re.Match[str]) -> float:
    return float(match.group("num").replace(",", ""))


def _blank(text: str, match: re.Match[str]) -> str:
    """``text`` with the match replaced by spaces, so the next rule cannot read it again."""
    return text[: match.start()] + " " * (match.end() - match.start()) + text[match.end() :]


def _read_clause(clause: str) -> Predicate | Ambiguity:
    c = clause.lower()

    # Guards: "don't regress task X", "never break task X", "keep task X passing".
    if (_NEGATION.search(c) and _GUARD_VERB.search(c)) or _KEEP.search(c):
        task = _TASK.search(clause)
        if task is None:
            return Ambiguity(clause, "which task? name it: 'don't regress task <id>'")
        return Predicate(NO_REGRESS, None, clause, op=">=", task=task.group("task"))

    found: list[Predicate] = []
    problems: list[str] = []
    rest = c

    for pattern in _STALL:
        while (m := pattern.search(rest)) is not None:
            found.append(Predicate(STALL, _number(m), clause))
            rest = _blank(rest, m)
    for pattern in _OTHER_MONEY:
        while (m := pattern.search(rest)) is not None:
            unit = m.group("unit")
            problems.append(f"unknown unit {unit!r}: budgets are counted in USD (write '$5' or '5 USD')")
            rest = _blank(rest, m)
    for pattern, scale in _USD_PATTERNS:
        while (m := pattern.search(rest)) is not None:
            found.append(Predicate(USD, _number(m) * scale, clause))
            rest = _blank(rest, m)
    for pattern in _ROLLOUTS:
        while (m := pattern.search(rest)) is not None:
            found.append(Predicate(ROLLOUTS, _number(m), clause))
            rest = _blank(rest, m)
    for pattern in _ITERATIONS:
        while (m := pattern.search(rest)) is not None:
            found.append(Predicate(ITERATIONS, _number(m), clause))
            rest = _blank(rest, m)
    while (m := _TIME.search(rest)) is not None:
        found.append(Predicate(SECONDS, _number(m) * _TIME_UNITS[m.group("unit")], clause))
        rest = _blank(rest, m)
    while (m := _REJECT_TOTAL.search(rest)) is not None:
        problems.append(
            f"{m.group(0).strip()!r}: in a row or in total? write '{m.group('num')} rejects in a row' "
            "for a stall"
        )
        rest = _blank(rest, m)

    # Targets: a number left over, with a word that makes it a goal.
    target = _TARGET_NUM.search(rest) if _TARGET_WORDS.search(rest) else None
    for m in [target] if target is not None else []:
        value = _number(m)
        if m.group("pct"):
            value /= 100
        elif value > 1:
            problems.append(f"{m.group('num')} is not a mean in [0, 1]: write {value / 100:g} or {value:g}%")
            rest = _blank(rest, m)
            continue
        if value > 1:
            problems.append(f"{m.group(0).strip()} is above 100%: no mean reward can reach it")
            rest = _blank(rest, m)
            continue
        splits = [name for name, words in _SPLIT_WORDS.items() if words.search(rest)]
        rest = _blank(rest, m)
        if "test" in splits:
            problems.append(_SEALED)
        elif len(splits) > 1:
            problems.append(
                f"which split? the clause names {' and '.join(splits)}; a goal is measured on val"
            )
        elif splits == ["train"]:
            problems.append(
                "a target on train is not a stopping signal: train is what the optimizer reads; "
                "the goal is the best's mean on full val (write 'val mean >= X')"
            )
        elif not splits:
            problems.append(f"which split? write 'val mean >= {value:g}' (the test split is sealed)")
        else:
            op = ">" if _STRICT.search(c) else ">="
            found.append(Predicate(VAL_MEAN, value, clause, op=op, split="val"))

    leftover = list(_ANY_NUM.finditer(rest))
    for m in leftover:
        after = re.match(r"\s*(%|[^\W\d_][\w-]*)", rest[m.end() :])
        unit = after.group(1) if after else ""
        if unit == "%":
            problems.append(f"{m.group(0)}% of what? write 'val mean >= {m.group(0)}%'")
        elif unit:
            problems.append(f"unknown unit {unit!r} after {m.group(0)}")
        else:
            problems.append(
                f"a bare number {m.group(0)}: say what it counts (val mean, $, hours, rollouts, iterations)"
            )

    if problems:
        return Ambiguity(clause, "; ".join(problems))
    if len(found) > 1:
        kinds = ", ".join(p.kind for p in found)
        return Ambiguity(clause, f"several conditions in one clause ({kinds}); separate them with commas")
    if found:
        return found[0]
    return Ambiguity(clause, _NO_NUMBER)


def parse(text: str | None) -> StopCondition:
    """Read a stop condition; never raises. Each clause (see :func:`split_clauses`) yields exactly
    one predicate or one ambiguity, in the clause order."""
    if text is None:
        return StopCondition(text="")
    text = str(text)
    clauses = split_clauses(text)
    predicates: list[Predicate] = []
    ambiguous: list[Ambiguity] = []
    for clause in clauses:
        try:
            result = _read_clause(clause)
        except Exception as exc:  # a bug here must not hide a clause: report it, never guess
            result = Ambiguity(clause, f"unreadable ({type(exc).__name__})")
        (predicates if isinstance(result, Predicate) else ambiguous).append(result)  # type: ignore[arg-type]
    return StopCondition(text, tuple(clauses), tuple(predicates), tuple(ambiguous))


# -- evaluation ----------------------------------------------------------------------------------


def _compare(actual: float, op: str, number: float) -> bool:
    return actual > number if op == ">" else actual >= number


def evaluate(condition: StopCondition, actuals: Actuals) -> list[dict[str, Any]]:
    """Each predicate with its measured ``actual`` and ``met``.

    A cap is met when the actual reached its number (time to stop); the goal is met when the
    best's mean over *every* val task reaches it (on part of val it is unmet, with a note); a
    guard is met while it holds (the best's mean on the task is not below the seed's); with no
    data it is unmet with ``actual`` None and a note."""
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
        else:
            actual = {
                USD: actuals.usd,
                SECONDS: actuals.seconds,
                ROLLOUTS: actuals.rollouts,
                ITERATIONS: actuals.iterations,
                STALL: actuals.stall,
            }[p.kind]
            met = _compare(float(actual), p.op, float(p.number or 0))
        row.update(actual=actual, met=met)
        if note:
            row["note"] = note
        out.append(row)
    return out
