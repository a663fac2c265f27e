"""Each extension point is one registry (CONTRIBUTING.md): what reads the names reads them from it."""

from __future__ import annotations

from pytest_capevolve._decide.rules import GATE_MODES, RULES
from pytest_capevolve._loop.git_store import STORE_KINDS
from pytest_capevolve._project.spec import HILL_CLIMB_STORES, VALIDATORS
from pytest_capevolve._session.kinds import KINDS


def test_the_spec_validates_gate_modes_and_stores_by_the_registries():
    assert tuple(RULES) == GATE_MODES
    for mode in RULES:
        assert VALIDATORS["gate_mode"](mode) == mode
    assert set(STORE_KINDS) == set(HILL_CLIMB_STORES)


def test_the_session_kinds_are_named_by_their_table_and_evaluate_comes_last():
    assert all(name == kind.name for name, kind in KINDS.items())
    assert list(KINDS)[-1] == "evaluate"
