"""``capevolve verify`` on the α budget: each gate decision at its own level (issue 25)."""

from __future__ import annotations

import pytest

from pytest_capevolve._decide import alpha_budget


def _decision(seq: int, tag: str, j: int, alpha_j: float, decision: str = "reject") -> dict:
    return {
        "seq": seq,
        "kind": "gate_decision",
        "tag": tag,
        "j": j,
        "alpha_j": alpha_j,
        "schedule": "lord",
        "decision": decision,
    }


@pytest.mark.attack(
    "laundering",
    attack=(
        "two (or more) gate sessions on one run at once under a loop schedule (`addis`, `lord`, "
        "`basel`), each gating another candidate: both decisions were taken at α_1, where in turn the "
        "second would have been judged at α_2 and rejected"
    ),
)
def test_two_decisions_judged_from_one_state_of_the_budget_are_named():
    first = float(alpha_budget.alpha_for("lord", 0.05, 1))
    second = float(alpha_budget.alpha_for("lord", 0.05, 2))
    in_turn = [_decision(3, "sign", 1, first), _decision(5, "careful", 2, second, "accept")]
    assert alpha_budget.slot_problems(in_turn, 0.05) == []
    raced = [_decision(3, "sign", 1, first), _decision(5, "careful", 1, first, "accept")]
    (line,) = alpha_budget.slot_problems(raced, 0.05)
    assert "seq 5 ('careful')" in line and "seq 3 ('sign') took" in line and "decision 2" in line
    # a level edited in the log (chained again by hand) is named too, against the schedule
    edited = [_decision(3, "sign", 1, first), _decision(5, "careful", 2, first)]
    (line,) = alpha_budget.slot_problems(edited, 0.05)
    assert "α_j = " in line and "decision 2" in line


@pytest.mark.attack(
    "laundering",
    attack=(
        "a gate session killed between judging and booking, so its verdict is booked later while "
        "another decision took its level"
    ),
    outcome=(
        "prevented: the decision (its level) is logged before its verdict file; a kill between them "
        "leaves the level spent and nothing to book"
    ),
)
def test_a_session_killed_between_judging_and_booking_leaves_a_spent_level_not_a_verdict():
    """The decision (its level) is logged before its verdict file: a kill between the two
    leaves the level spent and nothing to book, never a bookable verdict whose level the next
    decision takes again."""
    from types import SimpleNamespace

    from pytest_capevolve._decide.verdict import Verdict
    from pytest_capevolve._session.gating import AlphaBudget

    order: list[str] = []

    class Killed(Exception):
        pass

    def write_verdict(_verdict):
        order.append("verdict file")
        raise Killed  # the session dies here

    rundir = SimpleNamespace(
        log=SimpleNamespace(append_event=lambda kind, **_: order.append(kind)),
        verdicts=SimpleNamespace(write_verdict=write_verdict),
    )
    spec = SimpleNamespace(gate_alpha_schedule="lord", gate_alpha=0.05)
    budget = AlphaBudget(spec, [], ["careful"], against="seed")  # type: ignore[arg-type]
    verdict = Verdict("careful", "seed", "accept", "gate", "p ≤ α", "exact", 0.8, alpha=0.0304)
    try:
        budget.record(rundir, [], [verdict], [])  # type: ignore[arg-type]
    except Killed:
        pass
    assert order == ["gate_decision", "verdict file"]


def test_verify_checks_the_levels_without_importing_numpy():
    """``capevolve verify`` reads only the gate_decision lines and the locked α for the levels:
    the module it calls must not pull in numpy and the estimators (a twentieth of a verify of
    60,000 rollouts was their import)."""
    import subprocess
    import sys

    probe = "import sys, pytest_capevolve._policy.alpha.gate_settings; print('numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_verify_names_a_level_two_logged_decisions_took_among_thousands_of_rollouts(
    tmp_path, capsys, val_rollout
):
    """``capevolve verify`` checks the levels on the events its audit's pass over the log found
    not to be rollouts: two gate decisions numbered alike, logged among rollouts, are named."""
    from pytest_capevolve._cli.main import main
    from pytest_capevolve._store.rundir import RunDir

    run = RunDir(tmp_path / "run")
    level = float(alpha_budget.alpha_for("lord", 0.05, 1))
    for n, tag in enumerate(("sign", "careful")):
        for t in range(3):
            run.rollouts.record_rollout(val_rollout(tag, f"task-{t}", 0, 0.5))
        run.log.append_event(
            "gate_decision", tag=tag, j=1, alpha_j=level, schedule="lord", decision="reject", against=str(n)
        )
    code = main(["verify", str(run.root)])
    out = capsys.readouterr()
    assert code != 0
    assert "gate_decision seq" in out.out + out.err and "('careful'): numbered j = 1" in out.out + out.err
