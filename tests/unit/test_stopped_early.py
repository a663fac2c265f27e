"""``-x``/``--maxfail`` stopping the run loop at a failed rollout: the closing line says a run without the
flag completes the rest only when something is left to complete (pytest-xdist before 3.6 let the
workers run every rollout past the failure, and the line then promised a rest there was none of)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_capevolve._items.plan import RolloutKey
from pytest_capevolve._session.outcome import Outcome, SessionEnd


def _stopped_by_x(missing: list[RolloutKey]) -> list[str]:
    end = SessionEnd(
        conclude=lambda: Outcome(missing=list(missing)),
        against="seed",
        settle=list,
        interrupted=Outcome,
        damage=lambda: None,
        refusal=lambda: None,
    )
    option = SimpleNamespace(maxfail=1, collectonly=False, stepwise=False)
    session = SimpleNamespace(
        Failed=pytest.Session.Failed,
        Interrupted=pytest.Session.Interrupted,
        config=SimpleNamespace(option=option),
    )
    loop = end.pytest_runtestloop(session)  # type: ignore[arg-type]
    next(loop)
    with pytest.raises(StopIteration):
        loop.throw(pytest.Session.Failed("stopping after 1 failures"))
    return [line for line, _ in end.outcome.closing]


def test_a_stop_that_left_rollouts_owed_says_a_run_without_the_flag_completes_them() -> None:
    closing = _stopped_by_x([RolloutKey("val", "t1", "careful", 0)])
    assert any(line.startswith("stopped early by -x at a failed rollout") for line in closing), closing
    assert any("a run without -x (the command above) completes the rest" in line for line in closing)


def test_a_stop_that_left_nothing_owed_promises_no_rest() -> None:
    assert not any("stopped early" in line for line in _stopped_by_x([])), _stopped_by_x([])
