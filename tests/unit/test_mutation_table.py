"""``benchmarks/mutation.py``'s table of equivalent mutants names functions that exist: an entry
left behind when its code moved (``SignFlipResult.at_most`` to ``sign_flip``, ``sign_flip_test``
to ``arms``, rewritten) hid nothing, and a survivor of the moved code would go unexplained."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

MUTATION = Path(__file__).resolve().parents[2] / "benchmarks" / "mutation.py"


def test_every_equivalent_mutant_names_a_function_of_the_mutated_modules() -> None:
    if not MUTATION.is_file():  # mutmut runs tests/unit in its mutants/ copy, which has no benchmarks/
        pytest.skip("no benchmarks/ beside this copy of tests/")
    spec = importlib.util.spec_from_file_location("benchmarks_mutation", MUTATION)
    assert spec is not None and spec.loader is not None
    mutation = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutation)
    assert mutation.stale_entries() == []
    # the check sees a name of moved code, and one of a module the run does not mutate
    moved = "pytest_capevolve._stats.core.xǁSignFlipResultǁat_most__mutmut_2"
    mutation.EQUIVALENT[moved] = "a stale name"
    mutation.EQUIVALENT["pytest_capevolve._stats.elsewhere.x_mean__mutmut_1"] = "not a target"
    assert mutation.stale_entries() == [moved, "pytest_capevolve._stats.elsewhere.x_mean__mutmut_1"]
