"""The calibration alarm is sticky and hears a leaky gate (issue 25, item 7). Its false-alarm
rate however often it is read, and its power, are computed exactly in
tests/calibration/test_alarm_power.py (issue 39, item 2)."""

from __future__ import annotations

import numpy as np

from pytest_capevolve._decide import calibration

ALPHA = 0.05
NULLS = 200


def test_the_alarm_is_sticky_and_still_hears_a_leaky_gate():
    rng = np.random.default_rng(7)
    leaky = rng.random(NULLS) < 0.25  # a gate accepting a quarter of its nulls
    events = [
        {"kind": calibration.NULL_EVENT, "decision": "accept" if a else "reject", "alpha": ALPHA}
        for a in leaky
    ]
    first = next(k for k in range(1, NULLS + 1) if calibration.calibration(events[:k], ALPHA)["alarm"])
    assert first <= 40
    assert all(calibration.calibration(events[:k], ALPHA)["alarm"] for k in range(first, NULLS + 1, 10))
    assert calibration.ALARM_E == 1 / calibration.ALARM_P  # Ville: P(E ever ≥ 100) ≤ 1 %
