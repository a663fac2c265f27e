"""The record's kinds are declared once (``_store/log/event_kinds.py``): an append of anything else is
refused before a byte is written, and every declaration is appended somewhere in the package."""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import pytest

import pytest_capevolve
from pytest_capevolve._store.log import event_kinds
from pytest_capevolve._store.log.event_kinds import DECLARED, ROLLOUT, UndeclaredEvent
from pytest_capevolve._store.rundir import RunDir

PACKAGE = Path(pytest_capevolve.__file__).parent
# the calls a kind is appended through: the log's own, a claim's logger, a plan's start event
APPENDERS = {"append_event", "_log", "build_plan"}


def test_an_undeclared_kind_or_field_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.log.append_event(ROLLOUT, split="val", task_id="t1", tag="seed", trial=0, reward=1.0)
    before = run.events_path.read_bytes()
    with pytest.raises(UndeclaredEvent, match="event kind 'note' is not declared; declare it once"):
        run.log.append_event("note", text="a kind nobody declared")  # type: ignore[arg-type]
    with pytest.raises(UndeclaredEvent, match=r"a rollout event with undeclared field\(s\) \['output'\]"):
        run.log.append_event(ROLLOUT, split="val", task_id="t2", tag="seed", trial=0, output="x")
    assert run.events_path.read_bytes() == before
    run.log.append_event(ROLLOUT, split="val", task_id="t2", tag="seed", trial=0)  # a field left out reads
    assert [e["task_id"] for e in run.log.of_kinds(ROLLOUT)] == ["t1", "t2"]


def test_a_kind_is_its_name_in_the_bytes_and_reads_back_as_a_plain_string(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.log.append_event(ROLLOUT, split="val", task_id="t1", tag="seed", trial=0, reward=None)
    line = run.events_path.read_text(encoding="utf-8").splitlines()[-1]
    assert '"kind": "rollout"' in line and type(json.loads(line)["kind"]) is str
    assert line == json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False)


def test_each_kind_is_declared_once_with_its_fields_and_a_meaning() -> None:
    names = [name for name, value in vars(event_kinds).items() if isinstance(value, event_kinds.Kind)]
    assert len(names) == len(DECLARED)  # no two constants name one kind
    for kind in DECLARED.values():
        assert kind.allowed and kind.meaning and not kind.allowed & {"seq", "ts", "kind", "prev"}, kind


@functools.cache
def _package_calls() -> tuple[tuple[Path, ast.Call], ...]:
    """Every call in the package's source, with its file: parsed once for the two tests below."""
    return tuple(
        (path, node)
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
    )


def _appended_names() -> set[str]:
    """The kind constants the package passes to an appender, found in its source."""
    found: set[str] = set()
    for path, node in _package_calls():
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called in APPENDERS and path.name != "event_kinds.py":
            found |= {arg.id for arg in node.args if isinstance(arg, ast.Name)}
    return found


def test_every_declared_kind_is_appended_somewhere_in_the_package() -> None:
    """A declaration nothing appends has rotted: delete it (or find where its events went)."""
    declared = {name for name, value in vars(event_kinds).items() if isinstance(value, event_kinds.Kind)}
    assert declared - _appended_names() == set()


def test_every_field_an_append_names_is_declared_for_its_kind() -> None:
    """Each ``append_event(KIND, field=...)`` in the package names only fields KIND declares (the
    runtime check, made on the source: an append on a path no test takes is held to it too). A
    kind passed in a variable (``build_plan``'s) is checked where it is named, at run time."""
    wrong = []
    for path, node in _package_calls():
        if not isinstance(node.func, ast.Attribute) or node.func.attr != "append_event" or not node.args:
            continue
        first = node.args[0]
        kind = getattr(event_kinds, first.id, first.id) if isinstance(first, ast.Name) else first
        named = {k.arg for k in node.keywords if k.arg is not None}
        if isinstance(kind, str) and not isinstance(kind, event_kinds.Kind):
            continue  # a variable
        if not isinstance(kind, event_kinds.Kind) or not kind.allowed.issuperset(named):
            wrong.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert wrong == []
