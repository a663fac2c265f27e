"""Attacks on ``gate_margin`` (non-inferiority in the exact gate), landed this session.

``gate_margin`` is frozen with a run's gate settings at its first decision. A run whose
settings were frozen by a version before the key existed holds no ``gate_margin`` among them,
and the check compared only the keys the frozen event holds: a margin added to the spec of such
a run was taken without a word, and a candidate the run's rule ("better") rejects was accepted
as "no worse than −0.9". A key the frozen settings lack is now compared with its default, the
value that run decided under.
"""

from __future__ import annotations

import json

import pytest

from pytest_capevolve._cli.main import main
from pytest_capevolve._policy.alpha.gate_settings import settings_of
from pytest_capevolve._project.spec import load_spec
from pytest_capevolve._store.rundir import RunDir


@pytest.mark.attack(
    "record",
    attack=(
        "`gate_margin: -0.9` added to the spec of a run whose gate settings were frozen by a version "
        "before the key existed (the check compared only the keys the frozen event holds): a no-op "
        'with Δ̄ = −0.125 booked accept as "no worse than −0.9"'
    ),
    outcome=(
        "refused before anything is paid (exit 4): a frozen event without `gate_margin` was decided "
        'under "better" and is compared as 0, naming the way on (restore it, or a new run)'
    ),
)
def test_a_margin_added_to_a_run_frozen_before_the_key_existed_is_refused(
    example, projects, capevolve
) -> None:
    project = example("noisy_agent")
    projects.one_trial_with_noop(project, "Be courteous.")
    assert capevolve(project, "noop").ret == 0  # paid, not gated: nothing frozen yet
    run_dir = projects.run_dir(project)
    # the run's first decision, as the version before gate_margin froze it (no such key)
    old = {k: v for k, v in settings_of(load_spec(project)).items() if k != "gate_margin"}
    RunDir(run_dir).log.append_event("gate_settings_frozen", settings=old, overridden={})
    projects.edit_spec(project, "gate_mode: exact", "gate_mode: exact\ngate_margin: -0.9")
    result = capevolve(project, "noop", gate=True)
    verdict = run_dir / "verdicts" / "noop.json"
    assert not verdict.exists() or json.loads(verdict.read_text())["decision"] != "accept"
    assert result.ret == 4, result.stdout.str()[-2000:]
    said = result.stderr.str()
    assert "froze its gate settings at its first decision" in said and "gate_margin -0.9 (frozen 0.0)" in said
    assert "--capevolve-new-run" in said  # the way on


@pytest.mark.attack(
    "record",
    attack=(
        "`gate_margin: -0.9` added to the spec of a run whose gate settings were frozen by a version "
        "before the key existed (the check compared only the keys the frozen event holds): a no-op "
        'with Δ̄ = −0.125 booked accept as "no worse than −0.9"'
    ),
    note='null controls are asked "better": an honest run sounds no alarm',
)
def test_null_controls_are_asked_better_under_a_margin_so_an_honest_run_sounds_no_alarm(
    example, projects, capevolve
) -> None:
    """A copy of the best is no worse than −0.9 below it: judged at the margin, both nulls were
    accepted and the summary said CALIBRATION ALARM on an honest run."""
    project = example("noisy_agent")
    projects.one_trial_with_noop(project, "Be courteous.")
    projects.edit_spec(project, "gate_mode: exact", "gate_mode: exact\ngate_margin: -0.9")
    result = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "none"])
    assert result.ret in (0, 10), result.stdout.str()[-2000:]
    assert "CALIBRATION ALARM" not in result.stdout.str()
    verdicts = projects.run_dir(project) / "verdicts"
    noop = json.loads((verdicts / "noop.json").read_text())
    assert noop["margin"]["question"] == "no worse than -0.9"  # the candidate is asked the margin
    for null in ("seed-null1", "seed-null2"):
        verdict = json.loads((verdicts / f"{null}.json").read_text())
        assert "margin" not in verdict and "no worse than" not in verdict["reason"], verdict["reason"]


@pytest.mark.attack(
    "record",
    attack=(
        "unconfined: `gate_margin: -0.9` written into `capevolve.yaml` (or `capevolve_gate_margin` "
        "into `pytest.ini`) after the baseline, before the run's first decision: a worse no-op (Δ̄ = "
        '−0.125) accepted as "no worse than −0.9"'
    ),
    outcome=(
        "**not held**: gate settings freeze at the first decision, and an owner may set them until "
        "then; the verdict states the question it asked. Confined, the project is out of the agent's "
        "reach (the kernel refuses the edit)"
    ),
    note="xfail, strict",
)
@pytest.mark.xfail(
    strict=True,
    reason="gate settings freeze at the run's first decision, not its first session: between the "
    "baseline (whose data the optimizer has seen) and the first gate, an unconfined optimizer can "
    "set gate_margin in capevolve.yaml or capevolve_gate_margin in pytest.ini (the harness lock "
    "leaves capevolve_* keys to the spec lock, which holds the guard keys only). Freezing at the "
    "first session would refuse hill-climb's own lord schedule on runs a baseline made: a design "
    "change for the lead",
)
def test_a_margin_set_after_the_baseline_before_the_first_decision_is_not_taken(
    example, projects, capevolve
) -> None:
    project = example("noisy_agent")
    projects.one_trial_with_noop(project, "Be courteous.")
    assert capevolve(project, "noop").ret == 0  # the baseline's data paid and seen; nothing decided
    projects.edit_spec(project, "gate_mode: exact", "gate_mode: exact\ngate_margin: -0.9")
    capevolve(project, "noop", gate=True)
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "noop.json").read_text())
    assert verdict["decision"] != "accept", verdict["reason"]  # Δ̄ = −0.125: worse, and "no worse than −0.9"


FARE_RULE = "- RULE:check-fare-class — look up the fare class first."


def _adopted_in_a_new_run(projects, capevolve, capsys, project, tag: str, owners: str, gated: str) -> str:
    """``tag`` accepted and booked under the spec's ``owners`` text set to ``gated``, then gated in a
    new run under ``owners`` (``REPEAT``): what ``capevolve commit --decision accept`` refused with."""
    projects.edit_spec(project, owners, gated)
    assert capevolve(project, tag, gate=True).ret == 0
    projects.edit_spec(project, gated, owners)
    again = capevolve(project, tag, gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "none"])
    assert again.ret == 15, again.stdout.str()[-2000:]  # REPEAT of the accept
    capsys.readouterr()
    assert main(["commit", tag, "--project", str(project), "--decision", "accept"]) != 0
    return capsys.readouterr().err


@pytest.mark.attack(
    "laundering",
    attack=(
        'a no-op accepted as "no worse than −0.9" (`gate_margin: -0.9`) in one run; the owner drops '
        "the margin and starts a new run; its bytes gated there read `REPEAT` and `capevolve commit "
        '--decision accept` (brokered for the agent) adopted them as "accepted … at α = 0.05": a '
        'candidate worse on val became the best of a run that asks "better"'
    ),
    outcome=(
        "refused in one line: an accept is adopted only under the gate settings it answered (gate_mode, "
        "gate_margin, gate_alpha, …), "
        "naming the way on (gate a changed version)"
    ),
)
def test_a_margin_accept_is_not_adopted_by_a_run_that_asks_better(
    example, projects, capevolve, capsys
) -> None:
    project = example("noisy_agent")
    projects.one_trial_with_noop(project, "Be courteous.")
    margin = "gate_mode: exact\ngate_margin: -0.9"  # accepted, booked: "no worse than -0.9"
    said = _adopted_in_a_new_run(projects, capevolve, capsys, project, "noop", "gate_mode: exact", margin)
    assert "under gate_margin -0.9 (this run: 0.0)" in said and "gate a changed version" in said, said


@pytest.mark.attack(
    "laundering",
    attack=(
        "a candidate accepted at p = 0.09 in a run whose first decision froze `gate_alpha: 0.25` (or any gate "
        "setting but the mode and margin: `-o capevolve_gate_alpha=0.25` too); the owner's α of 0.05 back "
        "and a new run, its bytes gated there read `REPEAT` and `capevolve commit --decision accept` "
        "adopted them, a decision this run's α rejects"
    ),
    outcome="refused in one line naming the setting that differs and the way on (gate a changed version)",
)
def test_an_accept_at_a_looser_alpha_is_not_adopted_by_a_run_at_the_owners(
    example, projects, capevolve, capsys
) -> None:
    project = example("noisy_agent")
    # a rule that helps: accepted whatever the run's secret draws (a tag's draws are no longer its name's)
    projects.one_trial_with_noop(project, FARE_RULE)
    (project / "candidates" / "noop").rename(project / "candidates" / "c18")
    looser = "gate_alpha: 0.25"  # accepted at α = 0.25, booked
    said = _adopted_in_a_new_run(projects, capevolve, capsys, project, "c18", "gate_alpha: 0.05", looser)
    assert "under gate_alpha 0.25 (this run: 0.05)" in said and "gate a changed version" in said, said


@pytest.mark.attack(
    "laundering",
    attack=(
        "a candidate accepted in a run at the spec's constant α of 0.25; a new run at α 0.05 frozen at `addis` "
        "(as `capevolve hill-climb` runs, `-o capevolve_gate_alpha_schedule=addis`) gated its bytes, "
        '`REPEAT`, the session said "not adopted", and `capevolve commit --decision accept` adopted '
        "them anyway: commit compared the spec's settings, not the ones the run froze (and refused "
        "the opposite case naming a schedule the run never had)"
    ),
    outcome="refused in one line naming the run's frozen schedule, as the session refuses it",
)
def test_an_accept_is_compared_with_the_settings_the_new_run_froze_not_the_spec(
    example, projects, capevolve, capsys
) -> None:
    project = example("noisy_agent")
    projects.one_trial_with_noop(project, FARE_RULE)  # helps: accepted whatever the run's secret draws
    (project / "candidates" / "noop").rename(project / "candidates" / "c18")
    projects.edit_spec(project, "gate_alpha: 0.05", "gate_alpha: 0.25")
    assert capevolve(project, "c18", gate=True).ret == 0
    projects.edit_spec(project, "gate_alpha: 0.25", "gate_alpha: 0.05")  # 0.25 > 0.05: any schedule refuses
    addis = ["--capevolve-new-run", "--capevolve-commit", "none", "-o", "capevolve_gate_alpha_schedule=addis"]
    again = capevolve(project, "c18", gate=True, extra=addis)
    assert again.ret == 15, again.stdout.str()[-2000:]  # REPEAT of the accept, not adopted
    capsys.readouterr()
    assert main(["commit", "c18", "--project", str(project), "--decision", "accept"]) != 0
    said = capsys.readouterr().err
    assert "gate_alpha_schedule constant (this run: addis)" in said and "gate a changed version" in said, said
