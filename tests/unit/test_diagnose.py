"""`capevolve diagnose`: per-task bands, failure clusters, kept_good, the split comparison and the
reflective export (gold redacted) — from persisted rollouts of real sessions; pays nothing."""

from __future__ import annotations

import pytest

from pytest_capevolve._loop.diagnose import signature


@pytest.mark.parametrize(
    ("feedback", "expected"),
    [
        ("answered 22 to '3 * 7'", "answered <n> to <str>"),
        ('order "ABC-123" not found (code 404)', "order <str> not found (code <n>)"),
        ("user u4711   failed\n twice at 3.5s", "user <id> failed twice at <n>s"),
        ("hash deadbeefcafe mismatch", "hash <id> mismatch"),
        ("the customer's refund wasn't issued", "the customer's refund wasn't issued"),
        ("", "(no feedback)"),
    ],
)
def test_signature_folds_numbers_quotes_ids_and_whitespace(feedback, expected):
    assert signature(feedback) == expected
    assert signature(feedback) == signature(feedback)
