"""The threat model's attack tables, generated from the tests that replay the attacks.

A test that replays an attack carries its row: ``@pytest.mark.attack(SECTION, attack=...,
outcome=...)`` (``unconfined=`` in the kernel boundary's table, where an attack has an outcome on
each side of it; ``note=`` said beside the test's name). A test that replays a row another test
carries names the same section and attack, without an outcome, and is listed on that row. The
markers are read from the test files' syntax — no test is imported — and each section's rows
fill the ``<!-- reference:attacks-SECTION -->`` block of ``docs/explanation/threat-model.md``,
ordered by the file and line of the test that carries the row's outcome.
``tests/unit/test_threat_model.py`` fails when a row cannot be built (an attack no test gives an
outcome, two outcomes for one attack), when a block or a marker names a section the other lacks,
when the page names a test that does not exist, and when an attack test carries no row.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "tests"
PREFIX = "attacks-"  # a block's name is PREFIX + its section
WORDS = ("section", "attack", "outcome")  # the marker's positional arguments, in order
KEYWORDS = {*WORDS, "unconfined", "note"}
# a section whose first column is not "attack"
FIRST_COLUMN = {
    "kernel-boundary": "attack from candidate code (in its child)",
    "damage": "event",
    "held-before": "event",
}


class AttackRowError(ValueError):
    """A marker that cannot become a row (raised while the page is generated)."""


@dataclass
class Row:
    section: str
    attack: str
    outcome: str | None = None
    unconfined: str | None = None
    tests: list[tuple[str, str | None]] = field(default_factory=list)  # (path::test, note)
    place: tuple[str, int] = ("", 0)  # the file and line of the test that gives the outcome


def _is_attack(node: ast.expr) -> bool:
    return ast.unparse(node.func if isinstance(node, ast.Call) else node).endswith("mark.attack")


def _arguments(node: ast.expr, where: str) -> dict[str, str]:
    if not isinstance(node, ast.Call):
        raise AttackRowError(f"{where}: @pytest.mark.attack needs a section and an attack")
    found = dict(zip(WORDS, (ast.literal_eval(a) for a in node.args), strict=False))
    found |= {str(k.arg): ast.literal_eval(k.value) for k in node.keywords}
    unknown = sorted(set(found) - KEYWORDS)
    if unknown or not {"section", "attack"} <= set(found):
        raise AttackRowError(
            f"{where}: @pytest.mark.attack takes a section, attack= and outcome= (a row of its own) "
            f"or a section and attack= alone (another test's row), and unconfined=, note=; got {sorted(found)}"
        )
    return found


def markers(root: Path = TESTS) -> Iterator[tuple[str, int, dict[str, str]]]:
    """Every attack marker of the tests under ``root``: (path::test, line, its arguments)."""
    for path in sorted(root.rglob("test_*.py")):
        name = path.relative_to(root.parent).as_posix()
        yield from _file_markers(path, name, path.stat().st_mtime_ns)


@functools.cache
def _file_markers(path: Path, name: str, mtime_ns: int) -> list[tuple[str, int, dict[str, str]]]:
    """One file's markers, read again only once it changed (a page holds a block per section)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            test = f"{name}::{node.name}"
            found += [(test, node.lineno, _arguments(d, test)) for d in node.decorator_list if _is_attack(d)]
    return found


def rows(root: Path = TESTS) -> dict[str, list[Row]]:
    """Each section's rows, in page order; AttackRowError for a marker no row can take."""
    found: dict[tuple[str, str], Row] = {}
    for test, line, given in markers(root):
        row = found.setdefault((given["section"], given["attack"]), Row(given["section"], given["attack"]))
        row.tests.append((test, given.get("note")))
        if "outcome" not in given:
            continue
        if row.outcome is not None and (row.outcome, row.unconfined) != (
            given["outcome"],
            given.get("unconfined"),
        ):
            raise AttackRowError(
                f"{test}: another test gives this attack another outcome: {given['attack']!r}"
            )
        if row.outcome is None:
            row.outcome, row.unconfined, row.place = given["outcome"], given.get("unconfined"), (test, line)
    orphans = [row for row in found.values() if row.outcome is None]
    if orphans:
        raise AttackRowError(
            f"{orphans[0].tests[0][0]}: no test gives the attack {orphans[0].attack!r} of section "
            f"{orphans[0].section!r} an outcome (give it one, or name the attack as its row says)"
        )
    sections: dict[str, list[Row]] = {}
    for row in sorted(found.values(), key=lambda r: (r.place[0].split("::")[0], r.place[1])):
        sections.setdefault(row.section, []).append(row)
    return sections


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _tests_cell(row: Row) -> str:
    return ", ".join(f"`{test}`" + (f" ({note})" if note else "") for test, note in row.tests)


def attacks_markdown(section: str, root: Path = TESTS) -> str:
    """One section's table: a row per attack, its outcome(s) and the tests that replay it."""
    table = rows(root).get(section)
    if not table:
        raise AttackRowError(
            f"no test carries a row of section {section!r} (@pytest.mark.attack({section!r}, …))"
        )
    # an outcome on each side of the kernel boundary where a row gives one unconfined
    outcomes = ["outcome confined", "outcome unconfined"] if any(r.unconfined for r in table) else ["outcome"]
    lines = [
        f"| {FIRST_COLUMN.get(section, 'attack')} | {' | '.join(outcomes)} | test |",
        "|---" * (len(outcomes) + 2) + "|",
    ]
    for r in table:
        said = " | ".join(_cell(text or "") for text in (r.outcome, r.unconfined)[: len(outcomes)])
        lines.append(f"| {_cell(r.attack)} | {said} | {_tests_cell(r)} |")
    return "\n".join(lines)
