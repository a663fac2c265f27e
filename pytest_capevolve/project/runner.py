"""Running one rollout and scoring it: the one place that calls a user's agent and scorer.

Used by rollout items (on each worker, or in-process without xdist), by the ``adapter``
microcase check and by ``capevolve check``, so the three can never disagree on what counts as
an infra error. It writes nothing.

An infra error (run_target raised, ``Rollout.error`` set, timeout, scorer crash or a reward
outside [0, 1]) gives ``reward = None`` and ``infra_error`` set: missing data, never a 0.
"""

from __future__ import annotations

import contextlib
import inspect
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from .adapter import AdapterError, Rollout, Score, Task, check_reward, coerce_rollout


class AdapterRunner:
    """Calls one adapter the way its signature asks: ours, or cap-evolve's older one.

    Runs on each worker (or in-process without xdist), once per rollout item.
    """

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        params = inspect.signature(adapter.run_target).parameters
        self._passes_seed = "seed" in params
        self._passes_split = "split" in params

    @contextlib.contextmanager
    def live(self, candidate_dir: Path) -> Iterator[Any]:
        """Make ``candidate_dir`` the capability the agent uses, for the rollout's duration."""
        live = getattr(self.adapter, "live", None)
        if callable(live):
            with live(candidate_dir) as ctx:
                yield ctx
            return
        apply = getattr(self.adapter, "apply", None)
        if callable(apply):
            apply(candidate_dir)
        yield candidate_dir

    def run_target(self, task: Task, ctx: Any, *, seed: int, split: str) -> Rollout:
        kwargs: dict[str, Any] = {}
        if self._passes_seed:
            kwargs["seed"] = seed
        if self._passes_split:
            kwargs["split"] = split
        result = self.adapter.run_target(task, ctx, **kwargs)
        return coerce_rollout(result, task.id)

    def score(self, task: Task, rollout: Rollout) -> Score:
        result = self.adapter.score(task, rollout)
        if isinstance(result, Score):
            return result
        if isinstance(result, (int, float)) and not isinstance(result, bool):
            return Score(reward=float(result))
        if hasattr(result, "reward"):
            return Score(
                reward=result.reward,
                feedback=str(getattr(result, "feedback", "") or ""),
                metrics=getattr(result, "metrics", None),
            )
        raise AdapterError(f"score({task.id!r}) must return a Score, got {result!r}")


_OURS = frozenset({__file__, contextlib.__file__})


class RolloutTimeout(BaseException):
    """The rollout ran past ``rollout_timeout_s``. A BaseException, like KeyboardInterrupt, so
    an adapter's ``except Exception:`` retry loop does not swallow it."""


@contextlib.contextmanager
def _deadline(seconds: float | None, stop: FrameType | None = None) -> Iterator[None]:
    """Interrupt the rollout after ``seconds`` where a signal can (the main thread on POSIX).

    The timeout holds whatever the adapter catches: the timer re-arms every 50 ms until the
    rollout is over, and once it has fired every line the adapter runs (the frames between the
    interrupted one and ``stop``, and any it calls) raises :class:`RolloutTimeout` again, so
    even a bare ``except:`` that retries is left at its next line outside the ``try``.
    Elsewhere (another thread) the rollout runs to completion and is judged late afterwards;
    either way a late rollout is an infra error.
    """
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
        if frame.f_code.co_filename in _OURS:
            return None
        if event == "line":
            raise RolloutTimeout(message)
        return tracer

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if frame is not None and frame.f_code.co_filename in _OURS:
            return  # our own bookkeeping (the deadline's exit): fires again in 50 ms if need be
        while frame is not None and frame is not stop:
            frame.f_trace = tracer
            frame = frame.f_back
        sys.settrace(tracer)
        raise RolloutTimeout(message)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    previous_trace = sys.gettrace()
    signal.setitimer(signal.ITIMER_REAL, float(seconds), 0.05)  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        sys.settrace(previous_trace)


@dataclass
class Scored:
    """What one rollout gave: the agent's rollout (None if it crashed) and its score, or the
    infra error that makes it missing data."""

    rollout: Rollout | None
    reward: float | None = None
    feedback: str = ""
    metrics: Any = None
    infra_error: str | None = None
    seconds: float = 0.0


def run_and_score(
    runner: AdapterRunner,
    task: Task,
    candidate_dir: Path,
    *,
    seed: int,
    split: str,
    timeout_s: float | None = None,
) -> Scored:
    """Make ``candidate_dir`` live, run the agent once on ``task`` with ``seed``, score it."""
    started = time.perf_counter()
    scored = Scored(rollout=None)
    try:
        with runner.live(candidate_dir) as ctx, _deadline(timeout_s, stop=sys._getframe()):
            # the deadline interrupts run_target; live()'s set-up and clean-up are never cut
            # short, but count toward the rollout's time (judged late below)
            scored.rollout = runner.run_target(task, ctx, seed=seed, split=split)
    except RolloutTimeout as exc:
        scored.infra_error = f"timeout: {exc}"
    except Exception as exc:  # the agent's crash is data about infra, not a score
        scored.infra_error = f"run_target raised {type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - started
    rollout = scored.rollout
    if rollout is not None:
        if rollout.error:
            scored.infra_error = f"rollout error: {rollout.error}"
        elif timeout_s is not None and elapsed > timeout_s:
            scored.infra_error = f"timeout: rollout took {elapsed:.3f}s > {timeout_s}s"
        else:
            _score_into(scored, runner, task, rollout)
    scored.seconds = round(time.perf_counter() - started, 6)
    return scored


def _score_into(scored: Scored, runner: AdapterRunner, task: Task, rollout: Rollout) -> None:
    try:
        score = runner.score(task, rollout)
        reward = check_reward(score.reward, f"score({task.id!r})")
    except AdapterError as exc:
        scored.infra_error = f"invalid score: {exc}"
        return
    except Exception as exc:
        scored.infra_error = f"score raised {type(exc).__name__}: {exc}"
        return
    scored.reward = reward
    scored.feedback = str(score.feedback or "")
    scored.metrics = score.metrics
