"""The basis words: why a verdict or a booked decision came out as it did, one enum.

A ``StrEnum`` compares equal to, and is written as, the word records have always held, so old runs read the
same. A new refusal or rule names its basis here; the groups below are the only lists of them."""

from __future__ import annotations

from enum import StrEnum


class Basis(StrEnum):
    # the gate's rules (_decide/rules.py) and the checks after them (_decide/gate.py)
    EXACT = "exact"
    PAIRED = "paired"
    PAIRWISE = "pairwise"
    SIGNIFICANT = "significant"
    THRESHOLD = "threshold"
    STRICT = "strict"
    SIMPLICITY_TIEBREAK = "simplicity_tiebreak"
    NULL_FLOOR = "null_floor"
    REGRESSION_VETO = "regression_veto"
    GUARD = "guard"
    COVERAGE = "coverage"
    ERROR_IMBALANCE = "error_imbalance"
    # the sequential gate (_decide/stopping.py, _session/kinds/sequential.py)
    SEQUENTIAL_EFFICACY = "sequential_efficacy"
    SEQUENTIAL_FUTILITY = "sequential_futility"
    SEQUENTIAL_EXHAUSTION = "sequential_exhaustion"
    INTERRUPTED = "interrupted"
    LEVEL_TAKEN = "level_taken"
    # refused before any rollout (_session/refusals.py, _loop/hill_climb_record.py)
    TAMPER = "tamper"
    LEAK = "leak"
    MICRO_TEST_FAIL = "micro_test_fail"
    REPEAT = "repeat"
    # a booked reject's basis (``capevolve commit --reject-basis``)
    GATE = "gate"
    SCREEN_KILL = "screen_kill"
    CEILING = "ceiling"
    BUDGET = "budget"
    INFRA = "infra"
    # guards that refuse an action, not a candidate: no verdict holds them (_policy/guards.py)
    FINALIZED = "finalized"
    HARNESS_CHANGED = "harness_changed"


# a candidate refused by a screen before any rollout: a verdict without numbers
SCREENED = (Basis.TAMPER, Basis.LEAK, Basis.MICRO_TEST_FAIL)
# the bases ``capevolve commit --reject-basis`` books a reject on
REJECT_BASES = (
    Basis.GATE, Basis.SCREEN_KILL, Basis.CEILING, Basis.BUDGET, Basis.INFRA, Basis.MICRO_TEST_FAIL,
    Basis.REPEAT,
)  # fmt: skip
# an indecisive verdict that more rollouts could resolve (``--capevolve-grow``)
UNRESOLVED = (Basis.COVERAGE, Basis.ERROR_IMBALANCE)
