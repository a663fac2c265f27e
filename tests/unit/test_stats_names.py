"""``pytest_capevolve._stats`` names its public estimators three times, each for a reader of its own:
the imports under ``TYPE_CHECKING`` (mypy), ``__all__`` (mypy's strict ``implicit_reexport = false`` and
ruff's F401 read only a literal one) and ``_HOME`` (each name's module, for the lazy ``__getattr__``).
One table would give up one of the three readers; these tests hold the three equal instead."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from pytest_capevolve import _stats


def test_all_is_the_table_and_every_name_comes_from_its_module() -> None:
    table = [name for names in _stats._HOME.values() for name in names]
    assert sorted(_stats.__all__) == sorted(table) and len(set(table)) == len(table)
    for module, names in _stats._HOME.items():
        home = importlib.import_module(f"pytest_capevolve._stats.{module}")
        for name in names:
            assert getattr(_stats, name) is getattr(home, name), name


def test_the_imports_mypy_reads_are_the_table() -> None:
    tree = ast.parse(Path(_stats.__file__).read_text(encoding="utf-8"))
    (guarded,) = [node for node in tree.body if isinstance(node, ast.If)]  # if TYPE_CHECKING:
    imported = {
        str(node.module): tuple(alias.name for alias in node.names)
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
    }
    assert imported == _stats._HOME
