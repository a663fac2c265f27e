"""Running one rollout and scoring it: the one place that calls a user's agent and scorer.

Shared by rollout items, the ``adapter`` microcase check and ``capevolve check``, so they never
disagree on what counts as an infra error (``reward = None``: missing data, never a 0) and what
the candidate's side caused (:func:`charge`: a 0, never paid again as a fresh draw it chose;
docs/explanation/candidate-failures.md draws the line). It writes nothing. In a session the
candidate's side runs in a sandbox child (:func:`.sandbox.isolated`), else here (:class:`InProcess`)."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # CPython's own, under signal
import contextlib
import inspect
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from .._project.adapter import (
    AdapterError,
    Rollout,
    Score,
    Task,
    check_cost,
    check_reward,
    check_tokens,
    coerce_rollout,
)
from .judging import (
    Judged,
    declared_stochastic,
    rescores_for,
    score_keywords,
    score_rollout,
    score_rollout_async,
    settled,
)
from .rollout_output import RolloutOutput

if TYPE_CHECKING:
    from .sandbox import Sandboxes


class AdapterRunner:
    """Calls one adapter the way its signature asks: ours, or cap-evolve's older one."""

    def __init__(self, adapter: Any, judge_rescores: int = 1) -> None:
        self.adapter = adapter
        # times each output is scored (a declared-stochastic scorer only: .judging)
        self.rescores = rescores_for(adapter, judge_rescores)
        self.stochastic = declared_stochastic(adapter)
        params = inspect.signature(adapter.run_target).parameters
        self._passes = frozenset(n for n in ("seed", "split") if n in params)  # as its signature asks
        self.is_async = inspect.iscoroutinefunction(adapter.run_target)
        # where live() + run_target run: here, unless the runner was made by sandbox.isolated
        self.targets: InProcess | Sandboxes = InProcess(self)

    @property
    def on_loop(self) -> bool:
        """Needs a loop here: an async ``run_target`` run here (not in a sandbox child) or an async scorer."""
        if not self.is_async:  # asked once per rollout: a sync adapter's answer without inspecting
            return False
        return isinstance(self.targets, InProcess) or inspect.iscoroutinefunction(self.adapter.score)

    def close(self) -> None:
        """End what :attr:`targets` started (a sandbox's child processes). Idempotent."""
        self.targets.close()

    def live(self, candidate_dir: Path) -> AbstractContextManager[Any]:
        """Make ``candidate_dir`` the capability the agent uses, for the rollout's duration: the
        adapter's own ``live()``, else ``apply()`` called now and the folder as the context (no
        generator of ours around either: this is entered once per rollout)."""
        live = getattr(self.adapter, "live", None)
        if callable(live):
            return live(candidate_dir)  # type: ignore[no-any-return]
        apply = getattr(self.adapter, "apply", None)
        if callable(apply):
            apply(candidate_dir)
        return contextlib.nullcontext(candidate_dir)

    @contextlib.asynccontextmanager
    async def live_async(self, candidate_dir: Path) -> AsyncIterator[Any]:
        """:meth:`live` for an async adapter, whose ``live()`` may be an async context manager."""
        live = getattr(self.adapter, "live", None)
        if callable(live):
            manager = live(candidate_dir)
            if hasattr(manager, "__aenter__"):
                async with manager as ctx:
                    yield ctx
                return
            with manager as ctx:
                yield ctx
            return
        with self.live(candidate_dir) as ctx:
            yield ctx

    def _target_kwargs(self, **given: Any) -> dict[str, Any]:
        return {name: value for name, value in given.items() if name in self._passes}

    def run_target(self, task: Task, ctx: Any, *, seed: int, split: str) -> Rollout:
        result = self.adapter.run_target(task, ctx, **self._target_kwargs(seed=seed, split=split))
        return coerce_rollout(result, task.id)

    async def run_target_async(self, task: Task, ctx: Any, *, seed: int, split: str) -> Rollout:
        result = self.adapter.run_target(task, ctx, **self._target_kwargs(seed=seed, split=split))
        if inspect.isawaitable(result):
            result = await result
        return coerce_rollout(result, task.id)

    def score(self, task: Task, rollout: Rollout, *, seed: int) -> Score:
        return coerce_score(self.adapter.score(task, rollout, **score_keywords(self.adapter, seed)), task)

    def score_now(self, task: Task, rollout: Rollout, *, seed: int) -> Score:
        """:meth:`score` from plain code outside any event loop (``capevolve check``, a
        re-score of a persisted rollout): an ``async def`` scorer runs under ``asyncio.run``."""
        keywords = score_keywords(self.adapter, seed)
        return coerce_score(settled(self.adapter.score(task, rollout, **keywords)), task)


def declared_thread_safe(adapter: Any) -> bool:
    """Whether rollouts of ``adapter`` may run at once in one process, as its ``thread_safe``
    says. Without one, an ``apply(dir)`` adapter (no ``live()``) is unsafe: ``apply`` has only
    process-wide state to hand the rollout, so two candidates applied at once measure each other."""
    declared = getattr(adapter, "thread_safe", None)
    if declared is not None:
        if not isinstance(declared, bool):
            raise AdapterError(
                f"adapter {type(adapter).__name__}: thread_safe must be True or False, got {declared!r}"
            )
        return declared
    has_live = callable(getattr(adapter, "live", None))
    return has_live or not callable(getattr(adapter, "apply", None))


def coerce_score(result: Any, task: Task) -> Score:
    """What ``score()`` returned as a Score (a number or a cap-evolve Score are accepted)."""
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


# frames of the harness around a rollout, which its deadline never interrupts
_OURS = frozenset({__file__, contextlib.__file__})


@dataclass
class Scored:
    """What one rollout gave: the agent's rollout (None if it crashed) and its score, or the
    infra error that makes it missing data. ``captured``: what a rollout run in flight
    (:mod:`.inflight`) printed and logged, for its item; None when it ran in the caller."""

    rollout: Rollout | None
    reward: float | None = None
    feedback: str = ""
    metrics: Any = None
    infra_error: str | None = None
    seconds: float = 0.0
    captured: RolloutOutput | None = None
    judge: dict[str, Any] | None = None  # a stochastic scorer's r rewards and seeds (.judging)
    caused: str | None = None  # a death, a kill, a timeout: the candidate's failure, not missing data
    confinement: str | None = None  # its sandbox child's Confinement label; None: ran in this process


class InProcess:
    """A runner's :attr:`~AdapterRunner.targets`, as :class:`.sandbox.Sandboxes` is: runs the candidate's
    side of a rollout — ``live()``/``apply()`` and ``run_target`` — and gives back a :class:`Scored` with
    ``rollout`` or ``infra_error`` set, never a reward. This one runs it in this process: in the sandbox
    child, and for adapters only in memory (tests); a session never scores with it."""

    def __init__(self, runner: AdapterRunner) -> None:
        self.runner = runner

    def run(self, task: Task, candidate_dir: Path, **asked: Any) -> Scored:
        return run_target_here(self.runner, task, candidate_dir, **asked)

    async def run_async(self, task: Task, candidate_dir: Path, **asked: Any) -> Scored:
        return await run_target_here_async(self.runner, task, candidate_dir, **asked)

    def close(self) -> None:
        pass


def run_and_score(
    runner: AdapterRunner, task: Task, folder: Path, *, seed: int, split: str, timeout_s: float | None = None
) -> Scored:
    """Make the candidate ``folder`` live, run the agent once on ``task`` with ``seed`` where
    ``runner.targets`` runs it, and score it here. An adapter needing a loop here gets one of its own."""
    if runner.on_loop:
        import asyncio

        scoring = run_and_score_async(runner, task, folder, seed=seed, split=split, timeout_s=timeout_s)
        return asyncio.run(scoring)
    scored = runner.targets.run(task, folder, seed=seed, split=split, timeout_s=timeout_s)
    started = time.perf_counter()
    if (rollout := _to_score(scored, timeout_s)) is not None:
        try:
            judged: Judged | BaseException = score_rollout(
                runner.adapter, task, rollout, seed=seed, rescores=runner.rescores
            )
        except (Exception, SystemExit) as exc:
            judged = exc
        _take_score(scored, task, judged)
    return _charged(scored, started)


async def run_and_score_async(
    runner: AdapterRunner, task: Task, folder: Path, *, seed: int, split: str, timeout_s: float | None = None
) -> Scored:
    """:func:`run_and_score` for an adapter whose ``run_target`` is ``async def``, on the
    running event loop (the scorer may be ``async def`` too)."""
    scored = await runner.targets.run_async(task, folder, seed=seed, split=split, timeout_s=timeout_s)
    started = time.perf_counter()
    if (rollout := _to_score(scored, timeout_s)) is not None:
        try:
            judged: Judged | BaseException = await score_rollout_async(
                runner.adapter, task, rollout, seed=seed, rescores=runner.rescores
            )
        except (Exception, SystemExit) as exc:
            judged = exc
        _take_score(scored, task, judged)
    return _charged(scored, started)


def _charged(scored: Scored, started: float) -> Scored:
    """``scored`` charged (:func:`charge`), the scoring time since ``started`` added to its own."""
    charge(scored)
    scored.seconds = round(scored.seconds + time.perf_counter() - started, 6)
    return scored


CAUSED_LABEL = "candidate failure: "
# what the candidate's side reports of itself that is its own doing: a rollout past its deadline
# (the child's timer, or this side's clock) and an exit of its own process
CAUSED_PREFIXES = ("timeout: ", "run_target raised SystemExit(")


def charge(scored: Scored) -> Scored:
    """Book what the candidate's side caused (a death or kill of its sandbox child, a timeout,
    ``sys.exit`` in ``run_target``) against the candidate: a reward of 0, its reason in
    ``feedback`` and ``metrics["candidate_failure"]``, never missing data paid again."""
    why = scored.caused
    if why is None and scored.infra_error is not None and scored.infra_error.startswith(CAUSED_PREFIXES):
        why = scored.infra_error
    if why is None:
        return scored
    scored.caused, scored.infra_error, scored.reward, scored.judge = why, None, 0.0, None
    scored.feedback = f"{CAUSED_LABEL}{why}"
    scored.metrics = {"candidate_failure": why}
    return scored


class RolloutTimeout(BaseException):
    """The rollout ran past ``rollout_timeout_s``, raised by :func:`deadline` or, in flight, by
    :mod:`.inflight`'s watchdog. A BaseException, like KeyboardInterrupt, so an adapter's
    ``except Exception:`` retry loop does not swallow it."""


def timeout_message(timeout_s: float | None) -> str:
    """The infra error of a rollout stopped at its deadline, whoever stopped it."""
    return f"timeout: rollout exceeded rollout_timeout_s={timeout_s}"


# the deadline the running rollout is under, read by :func:`_on_alarm`: (message, the frame it
# stops at, files never interrupted); None between rollouts, so a late tick interrupts nothing
_ARMED: list[tuple[str, FrameType | None, frozenset[str]] | None] = [None]
# a sandbox child keeps :func:`_on_alarm` installed between rollouts (:func:`keep_alarm_handler`)
_KEEP_HANDLER = [False]


def keep_alarm_handler() -> None:
    """In a process whose SIGALRM is the deadline's alone (a sandbox child): its handler stays
    installed between rollouts, put back only when candidate code replaced it, instead of being
    installed and restored around every rollout (two ``rt_sigaction`` and their wrappers each)."""
    _KEEP_HANDLER[0] = True


def _interrupting(message: str, ours: frozenset[str]) -> Any:
    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename in ours:
            return None
        if event == "line":
            raise RolloutTimeout(message)
        return tracer

    return tracer


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    armed = _ARMED[0]
    if armed is None:
        return  # the rollout has ended: nothing runs under its deadline any more
    message, stop, ours = armed
    if frame is not None and frame.f_code.co_filename in ours:
        return  # our own bookkeeping (the deadline's exit): fires again in 50 ms if need be
    tracer = _interrupting(message, ours)
    while frame is not None and frame is not stop:
        frame.f_trace = tracer
        frame = frame.f_back
    sys.settrace(tracer)
    raise RolloutTimeout(message)


class deadline:  # noqa: N801  (a context manager used as a function was: ``with deadline(...)``)
    """Interrupt the rollout after ``seconds`` where a signal can (the main thread on POSIX), then
    on every line it runs (the timer re-arms every 50 ms), so even a retrying bare ``except:`` is
    left; elsewhere it is judged late. ``ours``: files whose frames are never interrupted. A class,
    not a generator: entered and left once per rollout, on the hot path."""

    __slots__ = ("seconds", "stop", "ours", "previous", "previous_trace", "usable")

    def __init__(self, seconds: float | None, stop: FrameType | None = None, *, ours: frozenset[str]) -> None:
        self.seconds, self.stop, self.ours = seconds, stop, ours
        self.previous: Any = None
        self.previous_trace: Any = None
        self.usable = False

    def __enter__(self) -> None:
        seconds = self.seconds
        self.usable = (
            seconds is not None
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
        )
        if not self.usable:
            return
        # _signal, not signal: its enum conversions were a third of a deadline's cost per rollout
        if not _KEEP_HANDLER[0]:
            self.previous = _signal.signal(_signal.SIGALRM, _on_alarm)
        elif _signal.getsignal(_signal.SIGALRM) is not _on_alarm:  # replaced by candidate code
            _signal.signal(_signal.SIGALRM, _on_alarm)
        self.previous_trace = sys.gettrace()
        _ARMED[0] = (f"rollout exceeded rollout_timeout_s={seconds}", self.stop, self.ours)
        signal.setitimer(signal.ITIMER_REAL, float(seconds), 0.05)  # type: ignore[arg-type]

    def __exit__(self, *exc: object) -> None:
        if not self.usable:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        _ARMED[0] = None
        if not _KEEP_HANDLER[0]:
            _signal.signal(_signal.SIGALRM, self.previous)
        sys.settrace(self.previous_trace)


def run_target_here(
    runner: AdapterRunner, task: Task, folder: Path, *, seed: int, split: str, timeout_s: float | None = None
) -> Scored:
    """The candidate's side of a rollout in this process and thread: its ``folder`` made
    live, the agent run once. ``seconds``: how long that took; no score."""
    started = time.perf_counter()
    scored = Scored(rollout=None)
    try:
        with runner.live(folder) as ctx, deadline(timeout_s, stop=sys._getframe(), ours=_OURS):
            # the deadline interrupts run_target; live()'s set-up and clean-up are never cut
            # short, but count toward the rollout's time (judged late by run_and_score)
            scored.rollout = runner.run_target(task, ctx, seed=seed, split=split)
    except RolloutTimeout as exc:
        scored.infra_error = f"timeout: {exc}"
    except (Exception, SystemExit) as exc:  # the agent's crash is data about infra, not a score
        scored.infra_error = _raised("run_target", exc)
    scored.seconds = round(time.perf_counter() - started, 6)
    return scored


async def run_target_here_async(
    runner: AdapterRunner, task: Task, folder: Path, *, seed: int, split: str, timeout_s: float | None = None
) -> Scored:
    """:func:`run_target_here` on the running event loop. The deadline cancels ``run_target``
    (a BaseException: ``except Exception:`` does not swallow it); an adapter that swallows it
    anyway is judged late, and in flight is reported at its deadline whatever it does."""
    import asyncio

    started = time.perf_counter()
    scored = Scored(rollout=None)
    limit = asyncio.timeout(timeout_s)
    try:
        async with runner.live_async(folder) as ctx:
            async with limit:  # live()'s set-up and clean-up are not cut short, as above
                scored.rollout = await runner.run_target_async(task, ctx, seed=seed, split=split)
    except TimeoutError as exc:
        scored.infra_error = timeout_message(timeout_s) if limit.expired() else _raised("run_target", exc)
    except (Exception, SystemExit) as exc:
        scored.infra_error = _raised("run_target", exc)
    scored.seconds = round(time.perf_counter() - started, 6)
    return scored


def _raised(method: str, exc: BaseException) -> str:
    """The one-line infra error of an adapter method that raised. ``SystemExit`` is caught too:
    it ends one rollout, never the session. ``KeyboardInterrupt`` is not: raised by the adapter
    or a real Ctrl-C, it looks the same, and a Ctrl-C must stop the session."""
    if isinstance(exc, SystemExit):
        return f"{method} raised SystemExit({exc.code!r}): an adapter must not exit the process"
    return f"{method} raised {type(exc).__name__}: {exc}"


def _to_score(scored: Scored, timeout_s: float | None) -> Rollout | None:
    """The rollout to score, if the candidate's side returned one: one reporting its own error,
    an invalid cost or token count, or back after its deadline (an adapter that swallowed the
    timeout) is an infra error instead."""
    rollout = scored.rollout
    if rollout is None or scored.infra_error is not None or scored.caused is not None:
        return None
    try:
        check_cost(rollout.cost_usd, f"run_target({rollout.task_id!r})")
    except AdapterError as exc:
        # what it cost is unknown: recorded as 0 (never a NaN or a refund in the spend sums)
        scored.rollout = replace(rollout, cost_usd=0.0)
        scored.infra_error = f"invalid cost: {exc}"
        return None
    try:
        check_tokens(rollout.tokens, f"run_target({rollout.task_id!r})")
    except AdapterError as exc:
        scored.rollout = replace(rollout, tokens=0)  # how many is unknown: never a negative sum
        scored.infra_error = f"invalid tokens: {exc}"
        return None
    if rollout.error:
        scored.infra_error = f"rollout error: {rollout.error}"
    elif timeout_s is not None and scored.seconds > timeout_s:
        scored.infra_error = f"timeout: rollout took {scored.seconds:.3f}s > {timeout_s}s"
    else:
        return rollout
    return None


def _take_score(scored: Scored, task: Task, judged: Judged | BaseException) -> None:
    """The scorer's answer (or what it raised) into ``scored``: a reward, or an infra error."""
    try:
        if isinstance(judged, BaseException):
            raise judged
        score = judged.score
        reward = check_reward(score.reward, f"score({task.id!r})")
    except AdapterError as exc:
        scored.infra_error = f"invalid score: {exc}"
        return
    except (Exception, SystemExit) as exc:
        scored.infra_error = _raised("score", exc)
        return
    scored.reward = reward
    scored.feedback = str(score.feedback or "")
    scored.metrics = score.metrics
    scored.judge = judged.judge
