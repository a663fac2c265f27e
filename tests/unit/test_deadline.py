"""The rollout's deadline on the main thread (runner.deadline): its SIGALRM handler put back after
each rollout in a process that shares the signal (the scoring process), kept installed between
rollouts in a sandbox child (keep_alarm_handler) and installed again when candidate code replaced
it; a rollout past its deadline is stopped either way."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_capevolve import Rollout, Task
from pytest_capevolve._engine import runner as runner_module
from pytest_capevolve._engine.runner import AdapterRunner, run_target_here

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers here")


class Adapter:
    """Notes the SIGALRM handler each rollout starts under; ``ignore`` replaces it with SIG_IGN
    (as candidate code may), ``spin`` runs until something stops it."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def tasks(self, split: str) -> list[Task]:
        return []

    def run_target(self, task: Task, ctx: Any, *, seed: int) -> Rollout:
        self.seen.append(signal.getsignal(signal.SIGALRM))
        if task.input == "ignore":
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while task.input == "spin":  # only the deadline ends it (the test would hang otherwise)
            time.sleep(0.005)
        return Rollout(task_id=task.id, output=task.input)

    def score(self, task: Task, rollout: Rollout) -> Any:
        raise NotImplementedError


@pytest.fixture
def kept() -> Iterator[None]:
    """This process as a sandbox child is: the deadline's handler kept between rollouts."""
    before = signal.getsignal(signal.SIGALRM)
    runner_module.keep_alarm_handler()
    try:
        yield
    finally:
        runner_module._KEEP_HANDLER[0] = False
        signal.signal(signal.SIGALRM, before)


def _run(adapter: Adapter, value: str, timeout_s: float = 30.0) -> Any:
    task = Task(id=value, input=value, target=None)
    return run_target_here(AdapterRunner(adapter), task, Path("."), seed=0, split="val", timeout_s=timeout_s)


def test_a_shared_process_gets_its_own_handler_back_after_each_rollout() -> None:
    def own(signum: int, frame: Any) -> None:
        pass

    before = signal.signal(signal.SIGALRM, own)
    try:
        adapter = Adapter()
        assert _run(adapter, "plain").rollout.output == "plain"
        assert adapter.seen == [runner_module._on_alarm]  # the deadline's, while the rollout ran
        assert signal.getsignal(signal.SIGALRM) is own
    finally:
        signal.signal(signal.SIGALRM, before)


def test_a_child_keeps_the_handler_and_installs_it_again_when_candidate_code_replaced_it(kept: None) -> None:
    adapter = Adapter()
    _run(adapter, "ignore")
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_IGN  # left as the candidate set it
    _run(adapter, "plain")
    assert adapter.seen == [runner_module._on_alarm, runner_module._on_alarm]
    assert signal.getsignal(signal.SIGALRM) is runner_module._on_alarm  # kept between rollouts
    assert runner_module._ARMED[0] is None  # a late tick interrupts nothing


@pytest.mark.parametrize("keep", [False, True], ids=["shared process", "sandbox child"])
def test_a_rollout_past_its_deadline_is_stopped(keep: bool, request: pytest.FixtureRequest) -> None:
    if keep:
        request.getfixturevalue("kept")
    adapter = Adapter()
    _run(adapter, "ignore")  # the handler replaced by the rollout before: this one's deadline still holds
    scored = _run(adapter, "spin", timeout_s=0.05)
    assert scored.rollout is None
    assert scored.infra_error == "timeout: rollout exceeded rollout_timeout_s=0.05"
