"""The spec's free-text ``stop_condition``, read by a fixed grammar — never guessed.

Each clause becomes one :class:`Predicate` or one :class:`Ambiguity` saying why it could not be read and what
to write instead: a vague clause is reported, never made a number. The grammar's rules read in order, each
blanking what it read so no number counts twice. Pure; :func:`parse` never raises."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, cast


class _Lazy:
    """A pattern of the grammar compiled at its first use: a session whose spec sets no stop condition
    (every resume of most runs) never compiles the grammar's thirty-odd patterns."""

    __slots__ = ("_compiled", "_source")

    def __init__(self, pattern: str, flags: int) -> None:
        self._source = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(*self._source)
        return getattr(self._compiled, name)


def _lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return cast("re.Pattern[str]", _Lazy(pattern, flags))


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


@dataclass(frozen=True)
class StopCondition:
    text: str
    clauses: tuple[str, ...] = ()
    predicates: tuple[Predicate, ...] = ()
    ambiguous: tuple[Ambiguity, ...] = ()


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
_FILLER = _lazy(
    r"\bwhichever\s+(?:one\s+)?(?:comes|happens|is\s+reached|occurs|is)\s+(?:first|sooner|earlier)\b",
    re.IGNORECASE,
)
# Commas split, except the thousands separator in 1,000; "or"/"and" split as whole words.
_SPLIT = _lazy(r"[;\n\r]|(?<![0-9]),|,(?![0-9]{3}(?![0-9]))|\b(?:or|and)\b|&", re.IGNORECASE)


_EDGES = _lazy(r"^[\s!?:\-]+|[\s.!?:\-]+$")  # a leading "." may start a number (.5)


def split_clauses(text: str | None) -> list[str]:
    if not text:
        return []
    text = unicodedata.normalize("NFKC", text)
    for old, new in (("≥", ">="), ("⩾", ">="), ("≤", "<="), ("⩽", "<="), ("’", "'"), ("‘", "'")):
        text = text.replace(old, new)
    cleaned = _FILLER.sub(" ", text)
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


# The grammar: one clause at a time.

_NUM = r"(?<![\w.])(?P<num>(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)"
_ANY_NUM = _lazy(_NUM)
_END = r"(?![\w])"

_TIME_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip
_ROUND_WORDS = r"(?:iterations?|iters?|rounds?|decisions?|generations?|candidates?|attempts?|tries)"
_ROUNDS = r"(?:\s*" + _ROUND_WORDS + r")?"  # an optional unit after a stall's count

_USD_PATTERNS = [
    (_lazy(r"(?:us)?\$\s*" + _NUM + r"(?:\s*(?:usd|dollars?))?" + _END), 1.0),
    (_lazy(_NUM + r"\s*(?:usd|us\$|\$|dollars?|bucks)" + _END), 1.0),
    (_lazy(r"\busd\s*" + _NUM + _END), 1.0),
    (_lazy(_NUM + r"\s*(?:cents?|¢)" + _END), 0.01),
]
_OTHER_MONEY = [
    _lazy(r"(?P<unit>[€£¥])\s*" + _NUM),
    _lazy(_NUM + r"\s*(?P<unit>eur|euros?|gbp|pounds?|yen|jpy|chf|francs?|[€£¥])" + _END),
]
_TIME = _lazy(_NUM + r"\s*(?P<unit>" + "|".join(sorted(_TIME_UNITS, key=len, reverse=True)) + ")" + _END)
_ROLLOUTS = [
    _lazy(_NUM + r"\s*(?:rollouts?|roll-outs?|metric[\s_-]*calls?|evaluations?|evals?|episodes?)" + _END),
    _lazy(r"(?:rollouts?|metric[\s_-]*calls?)\s*(?:of|at|to|=|:|<=|<)?\s*" + _NUM + _END),
]
_ITERATIONS = [
    _lazy(_NUM + r"\s*(?:iterations?|iters?|rounds?|decisions?|generations?)" + _END),
    _lazy(r"(?:iterations?|rounds?)\s*(?:of|at|to|=|:|<=|<)?\s*" + _NUM + _END),
]
_STALL = [
    _lazy(
        _NUM + r"\s*(?:consecutive\s+)?(?:rejects?|rejections?|rejected\s+candidates?|failed\s+"
        r"(?:attempts?|candidates?)|failures?|non-?improvements?)\s+in\s+a\s+row" + _END
    ),
    _lazy(
        r"\b" + _NUM + r"\s*consecutive\s+(?:rejects?|rejections?|rejected\s+candidates?|failures?|"
        r"failed\s+(?:attempts?|candidates?)|non-?improvements?)" + _END
    ),
    _lazy(r"\bstall(?:s|ed|ing)?\s*(?:at|of|after|for|=|:|>=)?\s*" + _NUM + _ROUNDS + _END),
    _lazy(
        r"\bno\s+(?:more\s+)?(?:improvements?|progress|accepts?|acceptances?|gains?|new\s+best)\s+"
        r"(?:for|in|after|over|within)\s+(?:the\s+last\s+)?" + _NUM + _ROUNDS + _END
    ),
    _lazy(
        _NUM + r"\s*" + _ROUND_WORDS + r"\s+(?:in\s+a\s+row\s+)?without\s+(?:an?\s+|any\s+)?"
        r"(?:improvements?|progress|accepts?|acceptances?|gains?|new\s+best)" + _END
    ),
    _lazy(r"\bplateau(?:s|ed|ing)?\s+(?:for\s+)?" + _NUM + _ROUNDS + _END),
]
_REJECT_TOTAL = _lazy(_NUM + r"\s*(?:rejects?|rejections?|failures?)" + _END)

_NEGATION = _lazy(
    r"\b(?:don't|dont|do\s+not|never|must\s+not|mustn't|should\s+not|shouldn't|no|without|avoid|"
    r"not)\b"
)
_GUARD_VERB = _lazy(r"\b(?:regress\w*|break\w*|broke|broken|hurt\w*|lose|losing|worsen\w*)\b")
_KEEP = _lazy(r"\bkeep\s+(?:the\s+)?tasks?\s+\S+\s+(?:passing|solid|green|working|fixed)\b")
_TASK = _lazy(r"\btasks?\s+[\"'`]?(?P<task>[\w.:/\-]*\w)[\"'`]?")

_PERCENT = r"(?P<pct>\s*(?:%|percent\b|pct\b))?"
_TARGET_NUM = _lazy(_NUM + _PERCENT)
_TARGET_WORDS = _lazy(
    r"(?:\bmean\b|\baverage\b|\bavg\b|\bpass(?:\s|-)?rates?\b|\baccuracy\b|\bscores?\b|\brewards?\b|"
    r"\bsuccess(?:\s+rates?)?\b|\breach\w*|\bhit\w*|\btarget\w*|\bgoal\b|>=|>|\bat\s+least\b|\babove\b|"
    r"\bexceed\w*|\bover\b|\bbeat\w*|\bsolve[sd]?\b|\bpass(?:es|ed)?\b|%|\bpercent\b)"
)
_STRICT = _lazy(r"(?<![<>=])>(?!=)|\babove\b|\bexceed\w*|\bover\b|\bmore\s+than\b|\bbeat\w*")
_SPLIT_WORDS = {
    "val": _lazy(r"\bval(?:idation)?\b|\bdev\s+split\b"),
    "test": _lazy(r"\btest(?:ing)?\b|\bheld[\s-]?out\b|\bholdout\b"),
    "train": _lazy(r"\btrain(?:ing)?\b"),
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
    return text[: match.start()] + " " * (match.end() - match.start()) + text[match.end() :]


def read_clause(clause: str) -> Predicate | Ambiguity:
    """One clause as a predicate, or an ambiguity naming every problem found in it."""
    c = clause.lower()

    # Guards: "don't regress task X", "never break task X", "keep task X passing".
    if (_NEGATION.search(c) and _GUARD_VERB.search(c)) or _KEEP.search(c):
        task = _TASK.search(clause)
        if task is None:
            return Ambiguity(clause, "which task? name it: 'don't regress task <id>'")
        return Predicate(NO_REGRESS, None, clause, op=">=", task=task.group("task"))

    found: list[Predicate] = []
    problems: list[str] = []
    rest = _read_quantities(clause, c, found, problems)
    rest = _read_target(clause, c, rest, found, problems)
    problems += _leftover_problems(rest)

    if problems:
        return Ambiguity(clause, "; ".join(problems))
    if len(found) > 1:
        kinds = ", ".join(p.kind for p in found)
        return Ambiguity(clause, f"several conditions in one clause ({kinds}); separate them with commas")
    if found:
        return found[0]
    return Ambiguity(clause, _NO_NUMBER)


def _read_quantities(clause: str, rest: str, found: list[Predicate], problems: list[str]) -> str:
    """The caps (stall, USD, rollouts, iterations, time) into ``found``, other currencies and ambiguous
    reject counts into ``problems``; returns ``rest`` with them blanked."""

    def take(pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
        """Each match of ``pattern`` in ``rest``, blanked as it is read."""
        nonlocal rest
        while (m := pattern.search(rest)) is not None:
            rest = _blank(rest, m)
            yield m

    for pattern in _STALL:
        found += (Predicate(STALL, _number(m), clause) for m in take(pattern))
    for pattern in _OTHER_MONEY:
        problems += (
            f"unknown unit {m.group('unit')!r}: budgets are counted in USD (write '$5' or '5 USD')"
            for m in take(pattern)
        )
    for pattern, scale in _USD_PATTERNS:
        found += (Predicate(USD, _number(m) * scale, clause) for m in take(pattern))
    for kind, patterns in ((ROLLOUTS, _ROLLOUTS), (ITERATIONS, _ITERATIONS)):
        for pattern in patterns:
            found += (Predicate(kind, _number(m), clause) for m in take(pattern))
    found += (Predicate(SECONDS, _number(m) * _TIME_UNITS[m.group("unit")], clause) for m in take(_TIME))
    problems += (
        f"{m.group(0).strip()!r}: in a row or in total? write '{m.group('num')} rejects in a row' for a stall"
        for m in take(_REJECT_TOTAL)
    )
    return rest


def _read_target(clause: str, c: str, rest: str, found: list[Predicate], problems: list[str]) -> str:
    """A number left over with a goal word, as a val mean; returns ``rest`` with it blanked."""
    m = _TARGET_NUM.search(rest) if _TARGET_WORDS.search(rest) else None
    if m is None:
        return rest
    value = _number(m)
    if m.group("pct"):
        value /= 100
    elif value > 1:
        problems.append(f"{m.group('num')} is not a mean in [0, 1]: write {value / 100:g} or {value:g}%")
        return _blank(rest, m)
    if value > 1:
        problems.append(f"{m.group(0).strip()} is above 100%: no mean reward can reach it")
        return _blank(rest, m)
    splits = [name for name, words in _SPLIT_WORDS.items() if words.search(rest)]
    problem = _split_problem(splits, value)
    if problem is not None:
        problems.append(problem)
    else:
        op = ">" if _STRICT.search(c) else ">="
        found.append(Predicate(VAL_MEAN, value, clause, op=op, split="val"))
    return _blank(rest, m)


def _split_problem(splits: list[str], value: float) -> str | None:
    """Why a target on these named splits is no goal (None: it is on val alone)."""
    if "test" in splits:
        return _SEALED
    if len(splits) > 1:
        return f"which split? the clause names {' and '.join(splits)}; a goal is measured on val"
    if splits == ["train"]:
        return (
            "a target on train is not a stopping signal: train is what the optimizer reads; "
            "the goal is the best's mean on full val (write 'val mean >= X')"
        )
    if not splits:
        return f"which split? write 'val mean >= {value:g}' (the test split is sealed)"
    return None


def _leftover_problems(rest: str) -> list[str]:
    """A problem per number no rule read: a percentage of nothing, an unknown unit, a bare number."""
    problems = []
    for m in _ANY_NUM.finditer(rest):
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
    return problems
