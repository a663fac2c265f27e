"""How an inspect_ai score value becomes a reward: one mapping, read by the bridge's
``InspectTaskAdapter.reward_of`` and by the inspect log reader (:mod:`.inspect_log`), so an
imported log and a bridged run score the same sample the same way.

``CORRECT`` ("C") → 1, ``PARTIAL`` ("P") → 0.5, ``INCORRECT`` ("I") → 0, ``NOANSWER`` ("N") → 0
(the agent was measured and said nothing useful: a 0, not missing data); ``True``/``False`` →
1/0; a number → itself (the caller checks it lies in [0, 1]; never clamped). Anything else has
no reward here (None): the caller refuses it in its own words.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.scorer import CORRECT, INCORRECT, NOANSWER, PARTIAL

REWARDS = {CORRECT: 1.0, PARTIAL: 0.5, INCORRECT: 0.0, NOANSWER: 0.0}


def inspect_reward(value: Any) -> float | None:
    """The reward of an inspect score value, or None when it has none (a dict, a list, another
    string)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value in REWARDS:
        return REWARDS[value]
    return None
