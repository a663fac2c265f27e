"""Issue 37, class 4: a guard switched off mid-run.

``leak_guard_min_length: false`` added to ``capevolve.yaml`` after the run began was not frozen:
a prompt naming every val id was then gated, accepted and booked, and nothing in the output,
the verdict or the log said the guard was off. The guards that decide what may be gated
(``leak_guard_min_length``, ``protected_paths``, ``harness_files``) are now frozen with the run
by ``spec.lock.yaml``: a change is refused before anything is paid, naming the way on (a new
run); a run that gates with the leak guard off says so in every verdict.
"""

from __future__ import annotations

import json
import shutil

import pytest

from pytest_capevolve._cli.main import main

# val ids of noisy_agent's frozen splits (split_seed 7, one trial)
VAL = ("n01", "n02", "n10", "n13")


def _leaky(project) -> None:
    """A candidate whose prompt names val tasks by id."""
    peek = project / "candidates" / "peek"
    shutil.copytree(project / "capability", peek)
    with (peek / "prompt.md").open("a") as handle:
        handle.write("".join(f"- For ticket {task_id}, escalate at once.\n" for task_id in VAL))


def _refused(result, key: str) -> str:
    assert result.ret == 4, result.stdout.str()[-2000:]
    lines = [line for line in result.stderr.str().splitlines() if f"{key} changed since run" in line]
    assert len(lines) == 1, result.stderr.str()
    assert "frozen with it" in lines[0] and "--capevolve-new-run" in lines[0]
    return lines[0]


@pytest.mark.attack(
    "harness",
    attack=(
        "`leak_guard_min_length: false` added to `capevolve.yaml` mid-run (or `-o "
        "capevolve_leak_guard_min_length=false`), then a prompt naming every val id gated (accepted "
        "and booked, before, with nothing saying the guard was off); `protected_paths` narrowed; "
        "`harness_files` emptied"
    ),
    outcome=(
        "refused in one line before anything is paid: the guards are frozen with the run in "
        "`spec.lock.yaml`; a new run (`--capevolve-new-run`) gates under new guards"
    ),
)
def test_a_guard_switched_off_mid_run_is_refused_before_anything_is_paid(
    one_trial_baseline, projects, capevolve
) -> None:
    project = one_trial_baseline  # the run begun (a copy of one build per process)
    _leaky(project)
    paid = len(projects.rollout_records(project))

    spec = project / "capevolve.yaml"
    honest = spec.read_text()
    spec.write_text(honest + "leak_guard_min_length: false\n")
    line = _refused(capevolve(project, "peek", gate=True), "leak_guard_min_length")
    assert "(was 4, now None)" in line
    # typed for one session on the command line: the same refusal
    spec.write_text(honest)
    _refused(
        capevolve(project, "peek", gate=True, extra=["-o", "capevolve_leak_guard_min_length=false"]),
        "leak_guard_min_length",
    )
    # the tamper guard narrowed, the harness lock's data files dropped: refused alike
    spec.write_text(honest.replace("protected_paths: [default]", "protected_paths: []"))
    _refused(capevolve(project, "peek", gate=True), "protected_paths")
    spec.write_text(honest + "harness_files: []\n")
    _refused(capevolve(project, "peek", gate=True), "harness_files")
    assert len(projects.rollout_records(project)) == paid
    assert not (projects.run_dir(project) / "verdicts" / "peek.json").exists()

    # as the run froze it, the leak guard refuses the candidate unpaid
    spec.write_text(honest)
    assert capevolve(project, "peek", gate=True).ret == 11
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "peek.json").read_text())
    assert verdict["basis"] == "leak"


@pytest.mark.attack(
    "harness",
    attack="a run that gates with the leak guard off from its start",
    outcome=(
        "labelled: every verdict records the guards (`details.guards`) and says the leak guard is off, "
        "under the verdict in the summary"
    ),
)
def test_a_run_gating_with_the_leak_guard_off_says_so_in_every_verdict(example, projects, capevolve) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    _leaky(project)
    (project / "capevolve.yaml").write_text(
        (project / "capevolve.yaml").read_text() + "leak_guard_min_length: false\n"
    )
    result = capevolve(project, "peek", gate=True)
    assert result.ret in (0, 10, 11), result.stdout.str()[-2000:]
    assert "the leak guard is off (leak_guard_min_length: false" in result.stdout.str()
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "peek.json").read_text())
    assert verdict["details"]["guards"]["leak_guard_min_length"] is None
    assert any("the leak guard is off" in warning for warning in verdict["warnings"])


@pytest.mark.attack(
    "harness",
    attack=(
        "unconfined: `leak_guard_min_length: false` written into `capevolve.yaml` mid-run and into the "
        "run's `spec.lock.yaml` to match (any frozen key: `shared_ledger` dropped, `protected_paths` "
        "narrowed), then a prompt naming val ids gated: not refused, and every verdict said the guard was "
        'off "frozen with the run"; or a guard key deleted from the lock, so a current run read as one '
        "a development build wrote"
    ),
    outcome=(
        "refused in one line before anything is paid (exit 4): `spec.lock.yaml` is held to the frozen "
        "keys the run's `run_created` event logged, naming each key edited, its value and the way on "
        "(restore it, or a new run); `capevolve verify` names it"
    ),
)
def test_a_guard_unfrozen_in_the_spec_and_its_lock_alike_is_refused(
    one_trial_baseline, projects, capevolve, capsys
) -> None:
    project = one_trial_baseline  # the run begun (a copy of one build per process)
    _leaky(project)
    paid = len(projects.rollout_records(project))
    spec, lock = project / "capevolve.yaml", projects.run_dir(project) / "spec.lock.yaml"
    honest_spec, honest_lock = spec.read_text(), lock.read_text()

    spec.write_text(honest_spec + "leak_guard_min_length: false\n")
    lock.write_text(honest_lock.replace("leak_guard_min_length: 4", "leak_guard_min_length: null"))
    result = capevolve(project, "peek", gate=True)
    assert result.ret == 4, result.stdout.str()[-2000:]
    lines = [line for line in result.stderr.str().splitlines() if "not what the run froze" in line]
    assert len(lines) == 1, result.stderr.str()
    assert "spec.lock.yaml: leak_guard_min_length" in lines[0] and "leak_guard_min_length: 4" in lines[0]
    assert "Restore it, or start a new run with --capevolve-new-run" in lines[0]
    capsys.readouterr()
    assert main(["verify", str(lock.parent)]) == 1
    assert "spec.lock.yaml: leak_guard_min_length not what the run froze (edited)" in capsys.readouterr().out

    # the key deleted from the lock (the pre-release look): named as edited, not as an old format
    spec.write_text(honest_spec)
    lock.write_text(honest_lock.replace("leak_guard_min_length: 4\n", ""))
    result = capevolve(project, "peek", gate=True)
    assert result.ret == 4 and "leak_guard_min_length not what the run froze" in result.stderr.str()
    assert "development build" not in result.stderr.str()
    assert len(projects.rollout_records(project)) == paid
    assert not (projects.run_dir(project) / "verdicts" / "peek.json").exists()

    # the way on: the lock restored, the run goes on under the guard it froze
    lock.write_text(honest_lock)
    assert capevolve(project, "peek", gate=True).ret == 11
    assert json.loads((projects.run_dir(project) / "verdicts" / "peek.json").read_text())["basis"] == "leak"
