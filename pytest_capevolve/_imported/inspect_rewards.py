"""How an inspect_ai score value becomes a reward, for the bridge and the log reader alike.

``N`` (no answer) is a 0, not missing data. A value with no reward is None: the caller refuses
it in its own words, and checks a number is in [0, 1]."""

from __future__ import annotations

from typing import Any

from inspect_ai.scorer import CORRECT, INCORRECT, NOANSWER, PARTIAL

REWARDS = {CORRECT: 1.0, PARTIAL: 0.5, INCORRECT: 0.0, NOANSWER: 0.0}


def inspect_reward(value: Any) -> float | None:
    """The reward of an inspect score value, or None when it has none (a dict, a list, another string)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value in REWARDS:
        return REWARDS[value]
    return None
