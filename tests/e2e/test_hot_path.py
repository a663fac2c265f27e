"""The per-rollout hot path: each piece made cheaper must still do exactly what it did.

A record is encoded once and decoded once per report for every hook; a plain task id skips
escaping; an atomic write hands back the written file's stat; rollout threads start without
waiting and are reused; the deadline watchdog wakes only for a sooner deadline. Speed itself
is measured in ``benchmarks/overhead.py`` and ``benchmarks/fanout.py``, not here.
"""

from __future__ import annotations

import gc
import threading
from types import SimpleNamespace

import pytest
from hypothesis import strategies as st

from pytest_capevolve import Rollout
from pytest_capevolve._items.nodes import (
    RECORD_PROPERTY,
)
from pytest_capevolve._store.record import RolloutRecord

json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
records = st.builds(
    RolloutRecord,
    run_id=st.just("20260101-000000-000000"),
    split=st.sampled_from(["train", "val"]),
    task_id=st.text(min_size=1, max_size=12),
    tag=st.sampled_from(["seed", "cand-1"]),
    trial=st.integers(0, 9),
    seed=st.integers(0, 2**31),
    candidate_hash=st.text(max_size=16),
    input=json_value,
    reward=st.none() | st.floats(0, 1),
    passed=st.none() | st.booleans(),
    infra_error=st.none() | st.text(max_size=20),
    feedback=st.text(max_size=20),
    metrics=json_value,
    output=json_value,
    trace=json_value,
    cost_usd=st.floats(0, 10),
    tokens=st.integers(0, 10**6),
    seconds=st.floats(0, 100),
)


def report_of(text: str | None, nodeid: str = "capevolve.yaml::val::t1[seed-t0]") -> SimpleNamespace:
    props = [] if text is None else [(RECORD_PROPERTY, text)]
    return SimpleNamespace(nodeid=nodeid, user_properties=props)


class Waiting:
    """A sync agent that waits until released (or 10 s)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def tasks(self, split):
        return []

    def run_target(self, task, ctx, *, seed):
        self.release.wait(timeout=10)
        return Rollout(output="late")

    def score(self, task, rollout):
        return 1.0


FREEZE_PROBE = """
import gc
from pathlib import Path


def pytest_runtest_call(item):
    with open(Path(__file__).with_name("freeze.log"), "a") as log:
        log.write(f"{gc.get_freeze_count()}\\n")
"""


def test_the_start_up_heap_is_frozen_for_the_run_loop_and_given_back(
    pytester: pytest.Pytester, example, capevolve
) -> None:
    """During the loop the objects alive at its start are out of the collector's generations;
    after the session (run here inside this process) they are back, so a session leaves the
    process's garbage collection as it found it."""
    assert gc.get_freeze_count() == 0
    pytester.makepyfile(freeze_probe=FREEZE_PROBE)
    pytester.syspathinsert()
    result = capevolve(example("toy_calc"), extra=["-p", "freeze_probe"])
    assert result.ret == 0
    seen = [int(n) for n in (pytester.path / "freeze.log").read_text().split()]
    assert seen and min(seen) > 0
    assert gc.get_freeze_count() == 0
