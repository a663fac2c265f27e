"""Scoring one rollout's output: once, or ``judge_rescores`` times for a stochastic scorer.

With ``stochastic_score = True`` and ``judge_rescores: r``, an output is scored r times and its
reward is the **mean**: still one number per rollout, alike for two arms that do the same thing,
so every gate stays exact and the SE holds the judge's variance. Re-score j at seed s runs with
``seed = s + JUDGE_SEED_STRIDE * j``, recorded in the ``judge`` field."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import Any

from .._project.adapter import AdapterError, Rollout, Score, Task, check_reward

JUDGE_SEED_STRIDE = 1_000_003  # a prime larger than any trial count, so no two seeds collide


def declared_stochastic(adapter: Any) -> bool:
    """Whether the adapter says its ``score()`` may give another reward on a re-score."""
    declared = getattr(adapter, "stochastic_score", False)
    if not isinstance(declared, bool):
        raise AdapterError(
            f"adapter {type(adapter).__name__}: stochastic_score must be True or False, got {declared!r}"
        )
    return declared


def rescores_for(adapter: Any, judge_rescores: int) -> int:
    """How many times each output is scored (r > 1 only for a scorer declared stochastic)."""
    if judge_rescores > 1 and not declared_stochastic(adapter):
        raise AdapterError(
            f"judge_rescores: {judge_rescores} needs a stochastic scorer: set stochastic_score = True "
            f"on {type(adapter).__name__} (its score() is an LLM judge), or judge_rescores: 1"
        )
    return judge_rescores


def wrong_rescores(judge: Any, valid: bool, rescores: int) -> str | None:
    """Why a record was not scored with the run's frozen ``judge_rescores`` (a worker's spec), or None."""
    got = len(judge.get("rewards") or []) if isinstance(judge, dict) else None
    if (got is not None and got != rescores) or (got is None and valid and rescores > 1):
        said = "no re-scores" if got is None else f"{got} re-score(s)"
        return (
            f"scored with {said} on its worker, but the run's judge_rescores is {rescores}: that "
            "worker's copy of the spec differs; copy the project again"
        )
    return None


def judge_seed(seed: int, j: int) -> int:
    return seed + JUDGE_SEED_STRIDE * j


@dataclass
class Judged:
    """The score a rollout gets: the first score with the mean reward, and the r rewards."""

    score: Score
    judge: dict[str, Any] | None = None


def _calls(adapter: Any, seed: int, rescores: int) -> tuple[bool, list[int], list[dict[str, Any]]]:
    """Whether the scorer is stochastic, the seeds it scores with and each call's keywords (a
    seed for a stochastic scorer that takes one)."""
    stochastic = declared_stochastic(adapter)
    seeds = [judge_seed(seed, j) for j in range(rescores if stochastic else 1)]
    try:
        takes_seed = stochastic and "seed" in inspect.signature(adapter.score).parameters
    except (TypeError, ValueError):
        takes_seed = False
    return stochastic, seeds, [{"seed": s} if takes_seed else {} for s in seeds]


def score_keywords(adapter: Any, seed: int) -> dict[str, Any]:
    """The keywords of one ``score()`` call outside a rollout (``capevolve check``'s re-score, a
    ``score`` microcase): the judge's ``seed`` where the scorer takes one, as a session passes it."""
    return _calls(adapter, seed, 1)[2][0]


def _combined(task: Task, scores: list[Any], seeds: list[int], stochastic: bool) -> Judged:
    from .runner import coerce_score

    taken = [coerce_score(s, task) for s in scores]
    if not stochastic:
        return Judged(taken[0])
    rewards = [check_reward(s.reward, f"score({task.id!r}) re-score {j}") for j, s in enumerate(taken)]
    mean = sum(rewards) / len(rewards)
    return Judged(replace(taken[0], reward=mean), {"rewards": rewards, "seeds": seeds})


def score_rollout(adapter: Any, task: Task, rollout: Rollout, *, seed: int, rescores: int) -> Judged:
    """Score ``rollout`` (r times if the scorer is stochastic). Raises what ``score()`` raised."""
    stochastic, seeds, calls = _calls(adapter, seed, rescores)
    return _combined(task, [adapter.score(task, rollout, **kw) for kw in calls], seeds, stochastic)


async def score_rollout_async(
    adapter: Any, task: Task, rollout: Rollout, *, seed: int, rescores: int
) -> Judged:
    """:func:`score_rollout` for an adapter whose ``score`` may be ``async def``."""
    stochastic, seeds, calls = _calls(adapter, seed, rescores)
    scores = []
    for kw in calls:
        result = adapter.score(task, rollout, **kw)
        scores.append(await result if inspect.isawaitable(result) else result)
    return _combined(task, scores, seeds, stochastic)


PREFERENCE_ORDERS = ("AB", "BA")  # A's output shown first, or B's


def require_prefer(adapter: Any, ref: str, gate_mode: str) -> None:
    """Refuse (:class:`AdapterError`) ``gate_mode: pairwise`` for an adapter with no ``prefer()``:
    said by ``capevolve check`` and before a session plans or pays."""
    if gate_mode == "pairwise" and not callable(getattr(adapter, "prefer", None)):
        raise AdapterError(
            f"adapter {ref}: gate_mode pairwise judges two outputs against each other with the "
            "adapter's prefer(task, output_a, output_b, *, seed) -> 'A' | 'B' | 'tie', which it "
            "does not define; define it, or gate on rewards (gate_mode: exact) in a new run"
        )


def prefer_in_order(adapter: Any, task: Task, output_a: Any, output_b: Any, *, order: str, seed: int) -> str:
    """The adapter's preference between A's and B's outputs shown in ``order``, its positional
    answer mapped back to arms; anything but A, B or tie is an :class:`AdapterError`."""
    first, second = (output_a, output_b) if order == "AB" else (output_b, output_a)
    said = settled(adapter.prefer(task, first, second, seed=seed))
    if said not in ("A", "B", "tie"):
        raise AdapterError(
            f"adapter {type(adapter).__name__}: prefer({task.id!r}, …) returned {said!r}; return "
            "'A' (the first output given is better), 'B' (the second is) or 'tie'"
        )
    return said if order == "AB" or said == "tie" else {"A": "B", "B": "A"}[said]


def settled(result: Any) -> Any:
    """``result``, awaited under ``asyncio.run`` when it is awaitable: an ``async def`` method
    called from plain code outside any event loop (``capevolve check``, a re-score, ``prefer``)."""
    if not inspect.isawaitable(result):
        return result
    import asyncio  # here: a sandbox child never scores, and never needs it

    async def waited() -> Any:
        return await result

    return asyncio.run(waited())
