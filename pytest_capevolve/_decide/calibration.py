"""The calibration alarm: do the run's null controls get accepted more often than α allows?

Null controls are byte-identical copies of the best, gated like candidates in every round; a
calibrated gate accepts each with probability ≤ its α. Over the run their accepts are tested
against α with a one-sided exact binomial test (scipy): when the tally is too high to be chance
the gate is not holding its error rate on this project (a leaky scorer, nondeterminism the
pairing does not cancel, a legacy mode), and every verdict of the run deserves suspicion.

The tally is looked at again after every null, so its level is spent across those looks: the
k-th null's tally (the first k nulls) is tested at ALARM_P·6/(π²k²), and the alarm sounds —
and stays sounded — once any look's p falls below its level. The levels sum to ALARM_P, so a
run whose gate does hold its α alarms with probability ≤ ALARM_P however many rounds it
gates (testing the whole tally at ALARM_P every round alarmed 5.3 % of 200-null runs).

Pure: the run's ``null_gated`` events in, a plain dict out (:class:`Calibration`).
"""

from __future__ import annotations

import math
from itertools import accumulate
from typing import Any, TypedDict

import numpy as np

NULL_EVENT = "null_gated"
ALARM_P = 0.01  # the run-level false-alarm rate: spent across the looks (one per null gated)
_SIX_OVER_PI_SQ = 6 / math.pi**2
MESSAGE = "the gate is not holding its error rate on this project"


class Calibration(TypedDict):
    """The null controls' tally, as ``capevolve spend`` prints it under ``calibration``."""

    nulls_gated: int
    accepts: int
    alpha: float
    p_value: float | None
    alarm_level: float | None  # the level the newest look's p is tested at
    alarm: bool
    text: str


def look_level(look: int) -> float:
    """The level the tally of the first ``look`` nulls is tested at (Σ over looks = ALARM_P)."""
    return ALARM_P * _SIX_OVER_PI_SQ / (look * look)


def calibration(events: list[dict[str, Any]], default_alpha: float) -> Calibration:
    """The null controls' accept tally over the run and whether it raises the alarm. Each
    null's acceptance chance is at most the α it was gated at; every look's tally (the first k
    nulls, k = 1..n) is tested against the largest of those at :func:`look_level` (k)."""
    gated = [e for e in events if e.get("kind") == NULL_EVENT]
    n = len(gated)
    accepted = [e.get("decision") == "accept" for e in gated]
    accepts = sum(accepted)
    # each look against the largest α of the nulls it tallies (a Binomial(k, max α) dominates
    # them), so the alarm is never too eager; a null without a recorded α counts at the default
    alphas = list(accumulate((float(e.get("alpha") or default_alpha) for e in gated), max))
    alpha = alphas[-1] if alphas else default_alpha
    p_value, alarm = None, False
    if n:
        # P(Binomial(k, α) ≥ accepts) from scipy.special, which imports in a fraction of the
        # time scipy.stats takes (seconds on a busy machine), and 1 for no accepts
        from scipy.special import bdtrc

        looks = np.arange(1, n + 1)
        tally = np.cumsum(accepted)
        p_looks = np.where(tally > 0, bdtrc(np.maximum(tally - 1, 0), looks, alphas), 1.0).astype(float)
        p_value = float(p_looks[-1])
        alarm = bool(np.any(p_looks < ALARM_P * _SIX_OVER_PI_SQ / looks.astype(float) ** 2))
    text = (
        f"null controls accepted {accepts} of {n} times over the run (α ≤ {alpha:g}; one-sided "
        f"binomial p = {p_value:.3g}, alarm level {look_level(n):.3g} at this look of {n})"
        if n
        else "no null control gated yet"
    )
    if alarm:
        text = f"CALIBRATION ALARM: {MESSAGE}: {text}"
    return {
        "nulls_gated": n,
        "accepts": accepts,
        "alpha": alpha,
        "p_value": p_value,
        "alarm_level": look_level(n) if n else None,
        "alarm": alarm,
        "text": text,
    }
