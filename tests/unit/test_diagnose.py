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
    assert signature(feedback, "loose") == expected
    assert signature(feedback, "loose") == signature(feedback, "loose")


def test_toy_calc_s_two_defects_stay_two_clusters_by_default():
    """'*' answered off by one and '-' answered without its sign are two defects; folding the
    quoted question whole made them one cluster (issue 26)."""
    times, minus = "answered 31 to '4 * 9'", "answered 6 to '5 - 11'"
    assert signature(times) == "answered <n> to '<n> * <n>'"
    assert signature(minus) == "answered <n> to '<n> - <n>'"
    assert signature("answered 22 to '3 * 7'") == signature(times)  # the same defect, one cluster
    assert signature(times, "loose") == signature(minus, "loose")  # the old grouping, on request
    assert signature(times, "exact") == times and signature("a  b\n c", "exact") == "a b c"
    assert signature('order "ABC-123" not found (code 404)') == 'order "<id>" not found (code <n>)'


def test_one_cause_written_three_ways_is_one_cluster_and_two_defects_stay_two():
    """Issue 39, item 6: paraphrased feedback split one defect into three clusters under every
    mode; now the content-word stems merge them (not under ``exact``)."""
    from pytest_capevolve._loop.diagnose import merge_paraphrases

    def clusters(feedback: list[str], mode: str = "normalized") -> list[dict]:
        grouped: dict[str, dict] = {}
        for i, text in enumerate(feedback):
            key = signature(text, mode)
            cell = grouped.setdefault(
                key,
                {"signature": key, "count": 0, "tasks": [], "example_feedback": text, "example_rollout": ""},
            )
            cell["count"] += 1
            cell["tasks"].append(f"t{i}")
        return list(grouped.values()) if mode == "exact" else merge_paraphrases(list(grouped.values()))

    refund = [
        "The refund policy clause was ignored.",
        "policy clause ignored: refund over the limit",
        "Ignored the refund clauses of the policies",
    ]
    for mode in ("normalized", "loose"):
        [one] = clusters(refund, mode)
        assert one["count"] == 3 and sorted(one["tasks"]) == ["t0", "t1", "t2"] and len(one["variants"]) == 2
    assert len(clusters(refund, "exact")) == 3  # identical feedback only, as asked
    # two defects stay two: their operators differ; unrelated causes stay apart
    late = ["late slip: expected 4, got 5 for '2 * 2'", "late slip: expected 0, got 1 for '3 - 3'"]
    assert len(clusters(late)) == 2
    assert len(clusters([*refund, "timeout after 30s", 'order "A-1" not found (code 404)'])) == 3
