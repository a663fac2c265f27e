"""A pytest plugin for ``benchmarks/overhead.py`` only (``-p _session_clock``, with benchmarks/ on
``PYTHONPATH``): it times the rollout loop and, when ``CAPEVOLVE_BENCH_IN_PROCESS=1``, builds the
session's runner without the sandbox (``run_target`` in the session's own process, as before
issue 24), so the same session can be measured with and without candidate isolation.

Nothing in the package offers that: there is no flag to run candidate code in-process, and this
file is never installed. Writes ``{"loop": s, "steady": s, "items": n}`` to
``CAPEVOLVE_BENCH_CLOCK``: the loop's wall time, and its wall time per item after the first (the
first rollout of an isolated session starts its sandbox child, a once-per-candidate cost).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from typing import Any

import pytest

if os.environ.get("CAPEVOLVE_BENCH_IN_PROCESS") == "1":
    from pytest_capevolve._engine.runner import AdapterRunner
    from pytest_capevolve._session import wiring

    def _in_process(
        adapter: Any, ref: str, project_dir: Any, judge_rescores: int = 1, **_: Any
    ) -> AdapterRunner:
        return AdapterRunner(adapter, judge_rescores)  # targets: InProcess

    wiring.isolated = _in_process  # type: ignore[assignment]

_marks: dict[str, float] = {"items": 0}


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    now = time.perf_counter()
    _marks.setdefault("first", now)
    _marks["last"] = now
    _marks["items"] += 1


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, Any, Any]:
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        items = int(_marks["items"])
        steady = (_marks.get("last", start) - _marks.get("first", start)) / max(items - 1, 1)
        clock = {"loop": time.perf_counter() - start, "steady": steady, "items": items}
        with open(os.environ["CAPEVOLVE_BENCH_CLOCK"], "w") as handle:
            json.dump(clock, handle)
