"""Marks every test under tests/e2e/ ``e2e`` by folder, so no test carries the marker by hand and
``-m "not e2e"`` (the mutation run) leaves out exactly this folder."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """At collection, on the controller and on each worker: a conftest's hook sees every
    collected item, so only those whose file is under this folder are marked."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)
