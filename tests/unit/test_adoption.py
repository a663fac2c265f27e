"""What an earlier run's accept must record to be adopted (:mod:`pytest_capevolve._policy.booking.adoption`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_capevolve._policy.alpha.gate_settings import settings_of
from pytest_capevolve._policy.booking.adoption import _another_question
from pytest_capevolve._policy.repeats.identity import Earlier
from pytest_capevolve._project.spec import load_spec

SPEC = load_spec(Path(__file__).resolve().parents[2] / "examples" / "toy_calc" / "capevolve.yaml")
EARLIER = Earlier("careful", "run-1", "accept", "α = 0.05, as recorded")


def accepted(**details: object) -> dict[str, object]:
    return {"decision": "accept", "details": details}


@pytest.mark.attack(
    "laundering",
    attack=(
        "an accept whose verdict records no gate settings (or lacks one of them) adopted by a new run: "
        "each missing setting was taken to match this run's"
    ),
    outcome="refused: a setting the verdict does not record is not this run's, and the refusal says so",
)
def test_an_accept_recording_no_gate_settings_is_not_adopted() -> None:
    assert _another_question(accepted(gate_settings=settings_of(SPEC)), {}, SPEC, EARLIER) == ""
    said = _another_question(accepted(), {}, SPEC, EARLIER)
    assert "records no gate settings: the question it answered is unknown" in said
    partial = {k: v for k, v in settings_of(SPEC).items() if k != "gate_margin"}
    said = _another_question(accepted(gate_settings=partial), {}, SPEC, EARLIER)
    assert "under gate_margin not recorded (this run: 0.0)" in said and "a new run whose spec" not in said


def test_only_a_gate_accept_on_the_same_val_is_adopted() -> None:
    same = accepted(gate_settings=settings_of(SPEC))
    forced = _another_question({**same, "decision": "reject"}, {"against_gate": True}, SPEC, EARLIER)
    assert forced.startswith("against its gate (which said 'reject'): only a gate's accept is adopted")
    overlap = Earlier("careful", "run-1", "accept", None, val_overlap=(11, 12, 13))
    assert "on a val of 12 tasks sharing 11 of this run's 13" in _another_question(same, {}, SPEC, overlap)


def test_an_accept_under_another_alpha_schedule_is_adopted_only_at_a_level_within_this_runs_alpha() -> None:
    """Issue 38: a one-shot gate's accept (constant) is adopted by a loop's run (addis) when the level it
    was decided at is ≤ this run's α; the schedule alone never sends the user to a constant run."""
    loop = replace(SPEC, gate_alpha_schedule="addis")
    constant = {**settings_of(SPEC), "gate_alpha_schedule": "constant"}
    at = {"mode": "exact", "alpha": 0.05}
    assert _another_question({**accepted(gate_settings=constant), **at}, {}, loop, EARLIER) == ""
    unknown = _another_question(accepted(gate_settings=constant), {}, loop, EARLIER)  # records no level
    assert "under gate_alpha_schedule constant (this run: addis)" in unknown
    looser = {**accepted(gate_settings={**constant, "gate_alpha": 0.25}), "mode": "exact", "alpha": 0.25}
    said = _another_question(looser, {}, loop, EARLIER)
    assert "gate_alpha 0.25 (this run: 0.05), gate_alpha_schedule constant (this run: addis)" in said
    assert said.endswith("a new run whose spec names gate_alpha: 0.25"), said
