"""A rollout's deadline where a signal can interrupt it (the main thread on POSIX): a SIGALRM
timer that raises :class:`RolloutTimeout` in the adapter's code until the rollout is left.
In flight, :mod:`.inflight`'s watchdog raises the same exception."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # CPython's own, under signal
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any


class RolloutTimeout(BaseException):
    """The rollout ran past ``rollout_timeout_s``. A BaseException, like KeyboardInterrupt, so
    an adapter's ``except Exception:`` retry loop does not swallow it."""


def timeout_message(timeout_s: float | None) -> str:
    """The infra error of a rollout stopped at its deadline, whoever stopped it."""
    return f"timeout: rollout exceeded rollout_timeout_s={timeout_s}"


@contextlib.contextmanager
def deadline(seconds: float | None, stop: FrameType | None = None, *, ours: frozenset[str]) -> Iterator[None]:
    """Interrupt the rollout after ``seconds`` where a signal can (the main thread on POSIX), then
    on every line it runs (the timer re-arms every 50 ms), so even a retrying bare ``except:`` is
    left; elsewhere it is judged late. ``ours``: files whose frames are never interrupted."""
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return
    message = f"rollout exceeded rollout_timeout_s={seconds}"

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename in ours:
            return None
        if event == "line":
            raise RolloutTimeout(message)
        return tracer

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if frame is not None and frame.f_code.co_filename in ours:
            return  # our own bookkeeping (the deadline's exit): fires again in 50 ms if need be
        while frame is not None and frame is not stop:
            frame.f_trace = tracer
            frame = frame.f_back
        sys.settrace(tracer)
        raise RolloutTimeout(message)

    # _signal, not signal: its enum conversions were a third of a deadline's cost per rollout
    previous = _signal.signal(_signal.SIGALRM, on_alarm)
    previous_trace = sys.gettrace()
    signal.setitimer(signal.ITIMER_REAL, float(seconds), 0.05)  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _signal.signal(_signal.SIGALRM, previous)
        sys.settrace(previous_trace)
