"""The calibration alarm: do the run's null controls get accepted more often than α allows?

Nulls are byte-identical copies of the best, so an alarm means the gate is not holding its error rate on this
project (a leaky scorer, nondeterminism the pairing does not cancel, a legacy mode). The test is a
likelihood-ratio mixture e-process over the leaky rates :data:`RATES`, a supermartingale while each null is
accepted with probability ≤ its α: by Ville P(E ever reaches 100) ≤ 1 %, however often read, and once
reached the alarm stays (``tests/calibration/test_alarm_power.py``). Pure."""

from __future__ import annotations

import math
from typing import Any, TypedDict

NULL_EVENT = "null_gated"
ALARM_P = 0.01  # the run-level false-alarm rate (Ville): the alarm sounds at E ≥ 1/ALARM_P
ALARM_E = 1 / ALARM_P
RATES = (0.08, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)  # the leaky rates the mixture listens for
MESSAGE = "the gate is not holding its error rate on this project"


def e_process(accepted: list[bool], alphas: list[float]) -> list[float]:
    """E after each null: the equal-weight mixture over :data:`RATES`, in logs."""
    logs = [0.0] * len(RATES)
    out = []
    for x, alpha in zip(accepted, alphas, strict=True):
        a = min(max(alpha, 1e-12), 1 - 1e-12)
        for i, q in enumerate(RATES):
            rate = max(q, a)
            logs[i] += math.log(rate / a) if x else math.log((1 - rate) / (1 - a))
        top = max(logs)
        out.append(math.exp(top) * sum(math.exp(v - top) for v in logs) / len(RATES))
    return out


class Calibration(TypedDict):
    nulls_gated: int
    accepts: int
    alpha: float
    p_value: float | None  # the whole tally's one-sided binomial p, for reading: no alarm rests on it
    e_value: float | None  # the mixture e-process after the newest null
    e_max: float | None  # its highest value over the run (the alarm is sticky)
    alarm_level: float | None  # the e-value at which the alarm sounds (1/ALARM_P)
    alarm: bool
    text: str


def calibration(events: list[dict[str, Any]], default_alpha: float) -> Calibration:
    """The nulls' accept tally and whether :func:`e_process` has reached :data:`ALARM_E` at some null. A
    null without a recorded α counts at the default."""
    gated = [e for e in events if e.get("kind") == NULL_EVENT]
    n = len(gated)
    accepted = [e.get("decision") == "accept" for e in gated]
    alphas = [float(e.get("alpha") or default_alpha) for e in gated]
    accepts = sum(accepted)
    alpha = max(alphas) if alphas else default_alpha
    p_value, e_value, e_max, alarm = None, None, None, False
    if n:
        path = e_process(accepted, alphas)
        e_value, e_max = path[-1], max(path)
        alarm = e_max >= ALARM_E
        # for reading only: P(Binomial(n, max α) ≥ accepts), from scipy.special (light to import)
        from scipy.special import bdtrc

        p_value = float(bdtrc(accepts - 1, n, alpha)) if accepts else 1.0
    text = (
        f"null controls accepted {accepts} of {n} times over the run (α ≤ {alpha:g}; e-value "
        f"{e_value:.3g}, highest {e_max:.3g}; the alarm sounds at {ALARM_E:g}, so a gate holding α "
        f"alarms in ≤ {ALARM_P:.0%} of runs; one-sided binomial p = {p_value:.3g})"
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
        "e_value": e_value,
        "e_max": e_max,
        "alarm_level": ALARM_E if n else None,
        "alarm": alarm,
        "text": text,
    }
