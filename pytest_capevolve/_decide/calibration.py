"""The calibration alarm: do the run's null controls get accepted more often than α allows?

Null controls are byte-identical copies of the best, gated like candidates in every round; a
calibrated gate accepts each with probability ≤ its α. Over the run their accepts are tested
against α with a one-sided exact binomial test (scipy): when the tally is too high to be chance
the gate is not holding its error rate on this project (a leaky scorer, nondeterminism the
pairing does not cancel, a legacy mode), and every verdict of the run deserves suspicion.

Pure: the run's ``null_gated`` events in, a plain dict out (:class:`Calibration`).
"""

from __future__ import annotations

from typing import Any, TypedDict

NULL_EVENT = "null_gated"
ALARM_P = 0.01  # the tally's p-value below which the alarm sounds
MESSAGE = "the gate is not holding its error rate on this project"


class Calibration(TypedDict):
    """The null controls' tally, as ``capevolve spend`` prints it under ``calibration``."""

    nulls_gated: int
    accepts: int
    alpha: float
    p_value: float | None
    alarm: bool
    text: str


def calibration(events: list[dict[str, Any]], default_alpha: float) -> Calibration:
    """The null controls' accept tally over the run and whether it raises the alarm. Each
    null's acceptance chance is at most the α it was gated at; the tally is tested against the
    largest of those (a Binomial(n, max α) dominates it), so the alarm is never too eager."""
    gated = [e for e in events if e.get("kind") == NULL_EVENT]
    n = len(gated)
    accepts = sum(1 for e in gated if e.get("decision") == "accept")
    alphas = [float(e["alpha"]) for e in gated if e.get("alpha") is not None]
    alpha = max(alphas, default=default_alpha)
    p_value = None
    if n:  # scipy.stats takes about a second to import: only when there is a tally to test
        from scipy import stats as sps

        p_value = float(sps.binomtest(accepts, n, alpha, alternative="greater").pvalue)
    alarm = p_value is not None and p_value < ALARM_P
    text = (
        f"null controls accepted {accepts} of {n} times over the run (α ≤ {alpha:g}; one-sided "
        f"binomial p = {p_value:.3g})"
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
        "alarm": alarm,
        "text": text,
    }
