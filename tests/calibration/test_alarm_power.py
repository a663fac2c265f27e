"""The calibration alarm's rates, computed exactly (issue 39, item 2): an exact first-passage
DP over the accept tally — no simulation — for a gate that accepts each null at rate q. The
e-value after n nulls with k accepts (one α throughout) depends on (n, k) alone, so the DP's
state is k among the runs not yet alarmed; it computes that e-value by its own closed form and
checks it against the module's."""

from __future__ import annotations

import math

import pytest

from pytest_capevolve._decide import calibration

ALPHA = 0.05


def closed_form_e(n: int, k: int, alpha: float) -> float:
    """The mixture of (q/α)^k·((1−q)/(1−α))^(n−k) over the rates, q raised to α where below it."""
    terms = []
    for q in calibration.RATES:
        rate = max(q, alpha)
        terms.append(math.exp(k * math.log(rate / alpha) + (n - k) * math.log((1 - rate) / (1 - alpha))))
    return sum(terms) / len(terms)


def alarm_within(q: float, horizon: int, alpha: float = ALPHA) -> float:
    """P(the alarm sounds within ``horizon`` nulls), each accepted with probability q."""
    alive = {0: 1.0}
    alarmed = 0.0
    for n in range(1, horizon + 1):
        nxt: dict[int, float] = {}
        for k, prob in alive.items():
            for accepts, p in ((k + 1, q), (k, 1 - q)):
                if closed_form_e(n, accepts, alpha) >= calibration.ALARM_E:
                    alarmed += prob * p
                else:
                    nxt[accepts] = nxt.get(accepts, 0.0) + prob * p
        alive = nxt
    return alarmed


@pytest.mark.parametrize(("n", "k"), [(1, 1), (4, 3), (40, 6), (200, 10), (200, 0)])
def test_the_dp_reads_the_modules_e_value(n, k):
    path = calibration.e_process([True] * k + [False] * (n - k), [ALPHA] * n)
    assert path[-1] == pytest.approx(closed_form_e(n, k, ALPHA), rel=1e-9)


def test_a_gate_holding_its_alpha_alarms_in_at_most_one_percent_of_runs():
    within_200, within_500 = alarm_within(ALPHA, 200), alarm_within(ALPHA, 500)
    assert within_200 <= within_500 <= calibration.ALARM_P  # Ville's bound holds at any horizon
    # the rates the docs state
    assert (round(within_200, 4), round(within_500, 4)) == (0.0048, 0.0056)
    assert alarm_within(0.02, 500) < within_500  # a gate below its α alarms less


def test_a_gate_accepting_a_quarter_of_its_nulls_is_heard_within_forty_in_four_runs_of_five():
    heard = alarm_within(0.25, 40)
    assert heard >= 0.80
    assert heard == pytest.approx(0.842, abs=0.001)  # the rate the docs state
    assert alarm_within(0.5, 20) > 0.95  # a gate accepting half is heard within 20
