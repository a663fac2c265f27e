"""The basis words are one enum whose values are the words old records hold."""

from __future__ import annotations

import json

from pytest_capevolve._decide.basis import REJECT_BASES, SCREENED, UNRESOLVED, Basis
from pytest_capevolve._decide.verdict import INDECISIVE, Verdict

# the words runs on disk already hold: renaming a member's value would orphan them
RECORDED = {
    "exact", "paired", "pairwise", "significant", "threshold", "strict", "simplicity_tiebreak", "null_floor",
    "regression_veto", "guard", "coverage", "error_imbalance", "sequential_efficacy",
    "sequential_futility", "sequential_exhaustion", "interrupted", "level_taken", "tamper", "leak",
    "micro_test_fail", "repeat", "gate", "screen_kill", "ceiling", "budget", "infra",
}  # fmt: skip


def test_every_basis_keeps_the_word_records_hold() -> None:
    assert {b.value for b in Basis} == RECORDED | {"finalized", "harness_changed"}  # guards no verdict holds
    assert all(json.dumps(b) == json.dumps(b.value) and f"{b}" == b.value for b in Basis)


def test_a_refusal_verdict_writes_its_basis_as_the_plain_word() -> None:
    verdict = Verdict(
        tag="c1",
        against="seed",
        decision=INDECISIVE,
        basis=Basis.LEAK,
        reason="r",
        mode="exact",
        min_coverage=0.8,
    )
    assert json.loads(json.dumps(verdict.to_dict()))["basis"] == "leak"


def test_the_groups_are_members() -> None:
    assert set(SCREENED) | set(REJECT_BASES) | set(UNRESOLVED) <= set(Basis)
    assert "micro_test_fail" in SCREENED and "micro_test_fail" in REJECT_BASES
