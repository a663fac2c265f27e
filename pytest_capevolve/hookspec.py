"""Hooks a project can implement (in a ``conftest.py`` or a plugin) to extend capevolve.

Loaded with ``pytest_addhooks``. Every hook runs on the controller only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pytest_capevolve_test_scored(result: dict[str, Any], run_dir: Path) -> None:
    """The test split has just been scored by a finalize session; the seal burns next.

    ``result`` is what ``seal.json`` will hold. Use it to publish the held-out number.
    Raising here aborts the burn: the seal stays unburned, and the next finalize reuses the
    persisted rollouts, so it reproduces this very score rather than drawing a new one::

        def pytest_capevolve_test_scored(result, run_dir):
            print("held-out mean:", result["best"]["mean"])
    """
