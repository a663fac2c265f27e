"""An inspect_ai log (``.eval`` or ``.json``), read with inspect's own reader
(``pip install 'pytest-capevolve[inspect]'``).

Each sample is a task, each epoch a trial; the reward is one scorer's value (the first, or
``scorer``) mapped by :func:`inspect_reward`. An errored or unscored sample is missing data.
The trial seed is the log's generate-config ``seed`` (:func:`log_seed`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .results import LOG_RESCALE, ImportedRun, Outcome, ReadOptions, ResultsError, checked_reward, made_run

# inspect_ai.scorer's CORRECT, PARTIAL, INCORRECT and NOANSWER: no answer is a 0, not missing data
REWARDS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}


def looks_like_inspect(path: Path, head: Any) -> bool:
    """An ``.eval`` file, or a JSON document with an inspect log's ``eval`` spec and ``version``."""
    if path.suffix.lower() == ".eval":
        return True
    return isinstance(head, dict) and isinstance(head.get("eval"), dict) and "version" in head


def inspect_reward(value: Any) -> float | None:
    """The reward of an inspect score value, for the bridge and this reader alike; None when it has
    none (a dict, a list, another string): the caller refuses it in its own words, and checks a
    number is in [0, 1]."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value in REWARDS:
        return REWARDS[value]
    return None


def read_inspect(path: Path, head: Any, options: ReadOptions) -> ImportedRun:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ResultsError(
            f"{path} is an inspect_ai log; reading it needs inspect_ai: pip install "
            "'pytest-capevolve[inspect]' (or export it as a CSV of task_id, trial, reward)"
        ) from None
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # inspect's reader raises whatever its parser met, on several lines
        said = " ".join(" ".join(str(exc).split("\n", 2)[:2]).split())  # pydantic's title and field
        raise ResultsError(
            f"{path}: inspect_ai could not read it as a log ({type(exc).__name__}: {said}); "
            "not an inspect_ai log? name its format with --format, or give the .eval / .json inspect wrote"
        ) from None
    names, scorer = [s.name for s in (log.eval.scorers or [])], options.scorer
    chosen = scorer or (names[0] if names else None)
    samples = list(log.samples or [])
    if scorer is None and chosen is None:
        chosen = next((name for s in samples for name in (s.scores or {})), None)
    if chosen is None and samples:
        raise ResultsError(f"{path}: the log has no scores (was it run with score=False?); score it first")
    if scorer is not None and names and scorer not in names:
        raise ResultsError(f"{path}: no scorer {scorer!r} in this log; its scorers: {', '.join(names)}")
    seed = log_seed(log)
    outcomes: list[Outcome] = []
    for sample in samples:
        task_id, trial, content = str(sample.id), str(sample.epoch), sample_content(sample)
        score = (sample.scores or {}).get(chosen or "")
        if sample.error is not None or score is None:
            error = (
                f"inspect sample error: {sample.error.message}" if sample.error else f"not scored by {chosen}"
            )
            outcomes.append(Outcome(task_id, trial, None, error, seed, content=content))
            continue
        reward = inspect_reward(score.value)
        where = f"{path}: sample {task_id!r} epoch {trial}, scorer {chosen}"
        if reward is None:
            raise ResultsError(
                f"{where}: score value {score.value!r} has no reward (C/P/I/N, a bool or a number "
                "in [0, 1] map); pick another scorer with --scorer, or export a CSV of task_id, "
                "trial, reward"
            )
        outcomes.append(
            Outcome(task_id, trial, checked_reward(reward, where, LOG_RESCALE), None, seed, content=content)
        )
    notes = [f"task {log.eval.task}, model {log.eval.model}, scorer {chosen}"]
    if len(names) > 1:
        notes.append(f"the log's scorers: {', '.join(names)} (--scorer picks another)")
    if log.status != "success":
        notes.append(f"the log's status is {log.status}: samples it did not finish are missing")
    return made_run(path, "inspect", options.label, outcomes, notes)


def sample_content(sample: Any) -> str:
    """What a sample is, as text: its input (a string, or each message's role and text: a message's
    own ``id`` is new in every run) and its target."""
    given = sample.input
    text = given if isinstance(given, str) else [f"{m.role}: {m.text}" for m in given]
    return json.dumps([text, sample.target], default=str)


def log_seed(log: Any) -> str | None:
    """The run's ``--seed``: the eval's generate config (``plan.config``, which overrides the
    model's at each call), else the model's (``eval.model_generate_config``). Given a ``Model``
    object, ``inspect_ai.eval(seed=...)`` records it in the first only."""
    for config in (getattr(log.plan, "config", None), log.eval.model_generate_config):
        if config is not None and config.seed is not None:
            return str(config.seed)
    return None
