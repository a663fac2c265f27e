"""How an inspect_ai score value becomes a reward, for the bridge and the log reader alike.

``C`` → 1, ``P`` → 0.5, ``I`` → 0, ``N`` (no answer) → 0, not missing data; ``True``/``False``
→ 1/0; a number → itself (the caller checks [0, 1]). Anything else is None: the caller refuses
it in its own words."""

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
