"""The stop condition's grammar: phrasings it must read (or refuse, with the reason), a property
that it never raises and accounts for every clause, and evaluation against measured actuals."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._policy.stop.stop_condition import (
    Actuals,
    StopCondition,
    evaluate,
    parse,
    split_clauses,
)

P = "predicate"
A = "ambiguous"

# (text, [(kind, number[, extra]) for each predicate, or (A, reason fragment) for each ambiguity])
PHRASINGS = [
    ("val mean ≥ 0.8", [("val_mean", 0.8)]),
    ("val mean >= 0.75", [("val_mean", 0.75)]),
    ("reach 80% on val", [("val_mean", 0.8)]),
    ("validation accuracy above 90%", [("val_mean", 0.9, {"op": ">"})]),
    ("pass rate 0.9", [(A, "which split?")]),
    ("reach 80% on test", [(A, "test split is sealed")]),
    ("test mean >= 0.7", [(A, "test split is sealed")]),
    ("mean 0.9 on train", [(A, "train is what the optimizer reads")]),
    ("reach 80 on val", [(A, "not a mean in [0, 1]")]),
    ("$5", [("usd", 5.0)]),
    ("5 USD", [("usd", 5.0)]),
    ("spend at most 3 dollars", [("usd", 3.0)]),
    ("a budget of $2.50", [("usd", 2.5)]),
    ("50 cents", [("usd", 0.5)]),
    ("€5", [(A, "unknown unit '€'")]),
    ("$50k", [(A, "unknown unit 'k'")]),
    ("2 hours", [("seconds", 7200.0)]),
    ("90 min", [("seconds", 5400.0)]),
    ("30m", [("seconds", 1800.0)]),
    ("1.5h", [("seconds", 5400.0)]),
    ("5 fortnights", [(A, "unknown unit 'fortnights'")]),
    ("1000 rollouts", [("rollouts", 1000.0)]),
    ("1,000 rollouts", [("rollouts", 1000.0)]),
    ("500 metric calls", [("rollouts", 500.0)]),
    ("10 iterations", [("iterations", 10.0)]),
    ("20 rounds", [("iterations", 20.0)]),
    ("3 rejects in a row", [("stall", 3.0)]),
    ("4 consecutive rejections", [("stall", 4.0)]),
    ("stall 4", [("stall", 4.0)]),
    ("no improvement for 5 iterations", [("stall", 5.0)]),
    ("3 rejects", [(A, "in a row or in total?")]),
    ("don't regress task n07", [("no_regress", None, {"task": "n07"})]),
    ("never break task q03", [("no_regress", None, {"task": "q03"})]),
    ("keep task n03 passing", [("no_regress", None, {"task": "n03"})]),
    ("do not break tasks", [(A, "which task?")]),
    ("when it's good enough", [(A, "no number")]),
    ("stop when the agent is great", [(A, "no number")]),
    ("0.8", [(A, "a bare number 0.8")]),
    ("10 candidates", [(A, "unknown unit 'candidates'")]),
    ("$5 in 2 hours", [(A, "several conditions in one clause")]),
    (
        "stop at val mean ≥ 0.8, $5 or 2 hours, whichever comes first; never break task n07",
        [("val_mean", 0.8), ("usd", 5.0), ("seconds", 7200.0), ("no_regress", None, {"task": "n07"})],
    ),
    (
        "1000 rollouts and 10 iterations\nor 3 rejects in a row",
        [("rollouts", 1000.0), ("iterations", 10.0), ("stall", 3.0)],
    ),
    ("val mean >= 0.9 or when it feels right", [("val_mean", 0.9), (A, "no number")]),
]


@pytest.mark.parametrize(("text", "expected"), PHRASINGS, ids=[t for t, _ in PHRASINGS])
def test_each_phrasing_gives_its_predicates_or_ambiguities(text, expected):
    parsed = parse(text)
    want_predicates = [e for e in expected if e[0] != A]
    want_ambiguous = [e[1] for e in expected if e[0] == A]
    got = [(p.kind, p.number) for p in parsed.predicates]
    assert got == [(e[0], e[1]) for e in want_predicates], parsed
    for predicate, want in zip(parsed.predicates, want_predicates, strict=True):
        for key, value in (want[2] if len(want) > 2 else {}).items():
            assert getattr(predicate, key) == value
        if predicate.kind == "val_mean":
            assert predicate.split == "val"
    assert len(parsed.ambiguous) == len(want_ambiguous), parsed
    for ambiguity, fragment in zip(parsed.ambiguous, want_ambiguous, strict=True):
        assert fragment in ambiguity.reason


def test_no_stop_condition_is_no_predicate():
    assert parse(None).predicates == () and parse(None).ambiguous == ()
    assert parse("") == StopCondition(text="")


@given(st.text(max_size=120))
def test_parser_never_raises_and_accounts_for_every_clause(text):
    parsed = parse(text)
    clauses = split_clauses(text)
    placed = [p.clause for p in parsed.predicates] + [a.clause for a in parsed.ambiguous]
    assert Counter(placed) == Counter(clauses)
    assert list(parsed.clauses) == clauses and all(c.strip() for c in clauses)
    assert not any(a.reason.startswith("unreadable") for a in parsed.ambiguous)


_WORDS = st.sampled_from(
    ["val", "mean", "test", ">=", "≥", "0.8", "80%", "$5", "5", "USD", "hours", "30m", "rollouts", "and", "or",
     ",", ";", "\n", "rejects", "in a row", "stall", "task", "n07", "never", "break", "1,000", "€", "reach"]
)  # fmt: skip


@given(st.lists(_WORDS, max_size=14).map(" ".join))
def test_near_miss_sentences_also_account_for_every_clause(text):
    parsed = parse(text)
    assert len(parsed.predicates) + len(parsed.ambiguous) == len(split_clauses(text))
    assert not any(a.reason.startswith("unreadable") for a in parsed.ambiguous)
    for p in parsed.predicates:
        if p.kind == "val_mean":
            assert 0.0 <= p.number <= 1.0 and "test" not in p.clause.lower()


def test_evaluate_caps_goal_and_guard_against_actuals():
    parsed = parse("val mean >= 0.8, $5, 2 hours, 100 rollouts, 10 iterations, stall 3, never break task a")
    rows = {r["kind"]: r for r in evaluate(
        parsed,
        Actuals(val_mean=0.85, val_full=True, usd=5.0, seconds=3600, rollouts=99, iterations=10, stall=1,
                task_means={"a": (0.4, 0.6)}),
    )}  # fmt: skip
    assert rows["val_mean"]["met"] is True and rows["val_mean"]["actual"] == 0.85
    assert rows["usd"]["met"] is True  # reached exactly: time to stop
    assert rows["seconds"]["met"] is False and rows["seconds"]["actual"] == 3600
    assert rows["rollouts"]["met"] is False
    assert rows["iterations"]["met"] is True
    assert rows["stall"]["met"] is False
    assert rows["no_regress"]["met"] is False and rows["no_regress"]["actual"] == {"best": 0.4, "seed": 0.6}
    assert rows["no_regress"]["role"] == "guard" and rows["usd"]["role"] == "cap"


def test_a_goal_counts_only_on_full_val_and_a_strict_target_must_be_exceeded():
    parsed = parse("val mean >= 0.8")
    partial = evaluate(parsed, Actuals(val_mean=0.9, val_full=False))[0]
    assert partial["met"] is False and "every val task" in partial["note"]
    assert evaluate(parsed, Actuals())[0]["met"] is False
    strict = parse("val mean above 0.8")
    assert evaluate(strict, Actuals(val_mean=0.8, val_full=True))[0]["met"] is False
    assert evaluate(strict, Actuals(val_mean=0.81, val_full=True))[0]["met"] is True
