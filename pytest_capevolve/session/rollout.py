"""Producing one rollout record: make the candidate live, run the agent, score, describe.

Runs on each worker (or in-process without xdist). It writes nothing: the record is plain
JSON that travels in the test report to the controller, which alone persists it.

An infra error (run_target raised, ``Rollout.error`` set, timeout, scorer crash or a reward
outside [0, 1]) yields a record with ``reward: null`` and ``infra_error`` set: missing data,
never a reward of 0.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..project.adapter import AdapterError, AdapterRunner, Task, check_reward

RECORD_SCHEMA = 1


class RolloutTimeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    """Interrupt the rollout after ``seconds`` where a signal can (the main thread on POSIX).

    Elsewhere the rollout runs to completion and is judged late afterwards; either way a late
    rollout is an infra error.
    """
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise RolloutTimeout(f"rollout exceeded rollout_timeout_s={seconds}")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def to_plain(value: Any) -> Any:
    """A JSON-able copy of ``value`` (non-JSON leaves become their repr)."""
    return json.loads(json.dumps(value, default=repr))


def execute_rollout(
    runner: AdapterRunner,
    task: Task,
    candidate_dir: Path,
    *,
    run_id: str,
    split: str,
    tag: str,
    trial: int,
    seed: int,
    content_hash: str,
    success_threshold: float,
    timeout_s: float | None,
) -> dict[str, Any]:
    started = time.perf_counter()
    record: dict[str, Any] = {
        "schema": RECORD_SCHEMA,
        "run_id": run_id,
        "split": split,
        "task_id": task.id,
        "tag": tag,
        "trial": trial,
        "seed": seed,
        "candidate_hash": content_hash,
        "input": to_plain(task.input),
        "reward": None,
        "passed": None,
        "infra_error": None,
        "feedback": "",
        "metrics": None,
        "output": None,
        "trace": None,
        "cost_usd": 0.0,
        "tokens": 0,
    }
    rollout = None
    try:
        with _deadline(timeout_s), runner.live(candidate_dir) as ctx:
            rollout = runner.run_target(task, ctx, seed=seed, split=split)
    except RolloutTimeout as exc:
        record["infra_error"] = f"timeout: {exc}"
    except Exception as exc:  # the agent's crash is data about infra, not a score
        record["infra_error"] = f"run_target raised {type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - started
    if rollout is not None:
        record.update(
            output=to_plain(rollout.output),
            trace=to_plain(rollout.trace),
            cost_usd=float(rollout.cost_usd or 0.0),
            tokens=int(rollout.tokens or 0),
        )
        if rollout.error:
            record["infra_error"] = f"rollout error: {rollout.error}"
        elif timeout_s is not None and elapsed > timeout_s:
            record["infra_error"] = f"timeout: rollout took {elapsed:.3f}s > {timeout_s}s"
        else:
            _score_into(record, runner, task, rollout, success_threshold)
    record["seconds"] = round(time.perf_counter() - started, 6)
    return record


def _score_into(
    record: dict[str, Any], runner: AdapterRunner, task: Task, rollout: Any, threshold: float
) -> None:
    try:
        score = runner.score(task, rollout)
        reward = check_reward(score.reward, f"score({task.id!r})")
    except AdapterError as exc:
        record["infra_error"] = f"invalid score: {exc}"
        return
    except Exception as exc:
        record["infra_error"] = f"score raised {type(exc).__name__}: {exc}"
        return
    record.update(
        reward=reward,
        passed=reward >= threshold,
        feedback=str(score.feedback or ""),
        metrics=to_plain(score.metrics),
    )
