"""The threat model's attack tables are generated from the attack tests' markers
(docs/hooks/attacks.py): every attack test carries a row, every test the page names exists,
and a marker that cannot make a row fails the build."""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "docs" / "hooks"))

import attacks  # noqa: E402
import reference  # noqa: E402

PAGE = REPO / "docs" / "explanation" / "threat-model.md"


@functools.cache
def _tests_defined(root: Path) -> frozenset[str]:
    """Every test function under ``root``, as ``tests/…::name`` (parsed once for the tests below)."""
    found = set()
    for path in root.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
                found.add(f"{path.relative_to(root.parent).as_posix()}::{node.name}")
    return frozenset(found)


def test_the_committed_threat_model_is_what_the_tests_markers_generate_now() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert reference.render(text) == text, "run `python docs/hooks/reference.py` and commit the page"


def test_every_test_the_threat_model_names_exists() -> None:
    named = set(re.findall(r"`(tests/[^`]*::[^`\[]*)`", PAGE.read_text(encoding="utf-8")))
    assert len(named) > 150  # the guards' table and every attack table
    assert sorted(named - _tests_defined(REPO / "tests")) == []


def test_every_attack_test_carries_a_row() -> None:
    marked = {test for test, _, _ in attacks.markers()}
    replays = {t for t in _tests_defined(REPO / "tests") if t.startswith("tests/e2e/test_attacks_")}
    assert len(replays) > 80
    assert sorted(replays - marked) == [], "give each a @pytest.mark.attack(SECTION, attack=..., outcome=...)"


def test_each_section_a_marker_names_has_its_block_on_the_page_and_each_block_its_rows() -> None:
    blocks = set(re.findall(r"<!-- reference:attacks-([a-z-]+) -->", PAGE.read_text(encoding="utf-8")))
    assert blocks == set(attacks.rows()), "a section's rows need its block, a block needs rows"


def _suite(tmp_path: Path, *bodies: str) -> Path:
    root = tmp_path / "tests"
    for number, body in enumerate(bodies):
        (root / "e2e").mkdir(parents=True, exist_ok=True)
        (root / "e2e" / f"test_{number}.py").write_text(f"import pytest\n\n{body}\n", encoding="utf-8")
    return root


OWNER = '@pytest.mark.attack("inputs", attack="a bad cost", outcome="an infra error")\ndef test_own(): ...\n'


def test_a_row_lists_every_test_that_replays_it_with_its_note(tmp_path: Path) -> None:
    joined = '@pytest.mark.attack("inputs", attack="a bad cost", note="the check")\ndef test_join(): ...\n'
    root = _suite(tmp_path, joined, OWNER)
    table = attacks.attacks_markdown("inputs", root)
    assert table.splitlines() == [
        "| attack | outcome | test |",
        "|---|---|---|",
        "| a bad cost | an infra error | `tests/e2e/test_0.py::test_join` (the check), `tests/e2e/test_1.py::test_own` |",
    ]


@pytest.mark.parametrize(
    "other",
    [
        '@pytest.mark.attack("inputs", attack="a bad cost", outcome="accepted")\ndef test_b(): ...',
        '@pytest.mark.attack("inputs", attack="a bad price", note="x")\ndef test_b(): ...',
        '@pytest.mark.attack("inputs", attack="a bad cost", outcomes="typo")\ndef test_b(): ...',
        "@pytest.mark.attack\ndef test_b(): ...",
    ],
    ids=["two-outcomes", "no-outcome", "unknown-keyword", "bare"],
)
def test_a_marker_that_cannot_make_a_row_fails_the_build_naming_its_test(tmp_path: Path, other: str) -> None:
    with pytest.raises(attacks.AttackRowError, match=r"tests/e2e/test_1\.py::test_b"):
        attacks.attacks_markdown("inputs", _suite(tmp_path, OWNER, other))


def test_a_block_no_test_gives_rows_fails_the_build(tmp_path: Path) -> None:
    with pytest.raises(attacks.AttackRowError, match="'harness'"):
        attacks.attacks_markdown("harness", _suite(tmp_path, OWNER))
