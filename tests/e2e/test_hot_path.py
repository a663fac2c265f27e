"""The per-rollout hot path: each piece made cheaper must still do exactly what it did.

A record is encoded once and decoded once per report for every hook; a plain task id skips
escaping; an atomic write hands back the written file's stat; rollout threads start without
waiting and are reused; the deadline watchdog wakes only for a sooner deadline. Speed itself
is measured in ``benchmarks/overhead.py`` and ``benchmarks/fanout.py``, not here.
"""

from __future__ import annotations

import gc

import pytest

FREEZE_PROBE = """
import gc
from pathlib import Path


def pytest_sessionstart(session):
    pytest_runtest_call(None)


def pytest_runtest_call(item):
    with open(Path(__file__).with_name("freeze.log"), "a") as log:
        log.write(f"{gc.get_freeze_count()}\\n")
"""


def test_the_start_up_heap_is_frozen_for_the_run_loop_and_given_back(
    pytester: pytest.Pytester, example, capevolve
) -> None:
    """From the end of configure (the plan made) and during the loop, the objects alive are out of
    the collector's generations; after the session (run here inside this process) they are back,
    so a session leaves the process's garbage collection as it found it."""
    assert gc.get_freeze_count() == 0
    pytester.makepyfile(freeze_probe=FREEZE_PROBE)
    pytester.syspathinsert()
    result = capevolve(example("toy_calc"), extra=["-p", "freeze_probe"])
    assert result.ret == 0
    seen = [int(n) for n in (pytester.path / "freeze.log").read_text().split()]
    assert seen and min(seen) > 0
    assert gc.get_freeze_count() == 0
