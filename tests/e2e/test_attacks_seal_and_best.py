"""Issue 24, red-team findings 5–7: the test split read without burning the seal, a best moved
by a forged log line, a best booked against the gate shown as if the gate had accepted it.

5. ``pytest --capevolve-finalize . --deselect "capevolve.yaml::test::n03[seed-t0]"`` paid 239
   of 240 test rollouts and left the seal unburned: the test mean was in ``rollouts/test/`` and
   gating was still open. A finalize stopped after paying (here: a plugin whose
   ``pytest_capevolve_test_scored`` raises) left gating open the same way;
6. ``RunDir(run).log.append_event("best_changed", best_id="noop")`` and a deleted
   ``state.json`` made the rejected ``noop`` the best that ``measure`` scored on test;
7. ``capevolve commit noop --decision accept --force`` made a rejected tag the best, labelled
   only in LEDGER.md."""

from __future__ import annotations

import shlex

import pytest
from run_log import events as _events
from run_log import one_line as _one_line

from pytest_capevolve._cli.main import main
from pytest_capevolve._store.rundir import RunDir


def _gated_noop(built, example, projects, capevolve):
    """A one-trial noisy_agent whose no-op candidate (a blank line in prompt.md) is gated: REJECT.
    Built once per process (tests/conftest.py's ``built``): each replay gets a copy."""

    def make():
        project = example("noisy_agent")
        projects.one_trial_with_noop(project)
        result = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "none"])
        assert result.ret == 10, result.stdout.str()[-2000:]
        return project, None

    project, _ = built("seal-and-best-noop-gated", "noisy_agent", make)
    return project, projects.run_dir(project)


@pytest.mark.attack(
    "record",
    attack=(
        '`--capevolve-finalize --deselect "capevolve.yaml::test::n03[seed-t0]"` (239 of 240 test '
        "rollouts paid, seal unburned, gating still open), or `-k`"
    ),
    outcome="refused in one line before any test rollout; a finalize is the whole test plan",
)
def test_a_finalize_that_deselects_part_of_the_test_plan_is_refused_before_any_rollout(
    one_trial_baseline, projects, capevolve
):
    project = one_trial_baseline  # a copy of one build per process
    run_dir = projects.run_dir(project)
    for selection in (["--deselect", "noisy_agent/capevolve.yaml::test::n03[seed-t0]"], ["-k", "not n03"]):
        result = capevolve(project, finalize=True, extra=selection)
        assert result.ret == 4, result.stdout.str()[-2000:]
        line = _one_line(result.stderr.str())
        assert "a finalize runs the whole test plan" in line and selection[0] in line
        assert not list((run_dir / "rollouts").glob("test/*.json"))  # nothing paid
        assert not [e for e in _events(run_dir) if e["kind"] in ("test_opened", "test_scored")]
    assert capevolve(project, "improved", gate=True, extra=["--capevolve-null", "0"]).ret in (
        0,
        10,
    )  # nothing was opened


class _StopsBeforeTheBurn:
    """Every test rollout paid, then the session stops before the seal is written."""

    def pytest_capevolve_test_scored(self, result, run_dir):
        raise RuntimeError("stopped before the burn")


@pytest.mark.attack(
    "record",
    attack="a finalize stopped after paying test rollouts, before the seal was written, then a gate",
    outcome=(
        "refused: the log's `test_opened` event, appended before the first test rollout, ends gating; "
        "the finalize can still be finished"
    ),
)
def test_a_finalize_that_paid_test_rollouts_ends_gating_even_unburned(
    one_trial_baseline, projects, capevolve, pytester
):
    project = one_trial_baseline  # a copy of one build per process
    pytester.runpytest(*capevolve.args(project, finalize=True), plugins=[_StopsBeforeTheBurn()])
    run_dir = projects.run_dir(project)
    assert list((run_dir / "rollouts").glob("test/*.json"))  # the test rewards are on disk
    kinds = [e["kind"] for e in _events(run_dir)]
    assert "test_scored" not in kinds and not (run_dir / "seal.json").exists()
    opened = kinds.index("test_opened")
    first_test = next(
        i for i, e in enumerate(_events(run_dir)) if e["kind"] == "rollout" and e["split"] == "test"
    )
    assert opened < first_test  # logged before the first test rollout was paid
    gate = capevolve(project, "improved", gate=True)
    assert gate.ret == 4 and "is finalized" in gate.stderr.str(), gate.stdout.str()[-2000:]
    assert not (run_dir / "verdicts" / "improved.json").exists()
    assert capevolve(project, finalize=True).ret == 0  # finishing it is still allowed


@pytest.mark.attack(
    "record",
    attack=(
        "a `best_changed` event appended with `RunDir(run).log.append_event`, `state.json` deleted, "
        "then `capevolve measure` (scored a rejected tag on test as the best)"
    ),
    outcome=(
        "refused: a `best_changed` is honoured only after a booked accept of that tag; state readers "
        "refuse the run in one line, `verify` names the event"
    ),
)
def test_a_forged_best_changed_event_moves_nothing_and_is_named(built, example, projects, capevolve, capsys):
    project, run_dir = _gated_noop(built, example, projects, capevolve)
    RunDir(run_dir).log.append_event("best_changed", best_id="noop")
    (run_dir / "state.json").unlink()
    code = main(["measure", "--project", str(project), "--finalize"])
    err = capsys.readouterr().err
    assert code != 0
    refused = [line for line in err.splitlines() if "books no accept" in line]
    assert len(refused) == 1 and "best_changed to 'noop'" in refused[0], err  # in one line
    assert not list((run_dir / "rollouts").glob("test/*.json"))  # measure scored nothing
    finalize = capevolve(project, finalize=True)
    assert finalize.ret == 4 and "books no accept" in finalize.stderr.str()
    code = main(["verify", "--project", str(project)])
    out = capsys.readouterr()
    assert code != 0 and "best_changed to 'noop'" in out.out + out.err


@pytest.mark.attack(
    "record",
    attack="`capevolve commit TAG --decision accept --force` on a rejected tag (only LEDGER.md said so)",
    outcome=(
        "labelled: `measure`, report.md (best and lineage), `capevolve runs`, the finalize summary and "
        'the dashboard say "forced: accepted against the gate"'
    ),
)
def test_a_forced_accept_is_labelled_wherever_the_best_is_shown(built, example, projects, capevolve, capsys):
    project, run_dir = _gated_noop(built, example, projects, capevolve)
    code = main(["commit", "noop", "--project", str(project), "--decision", "accept", "--force", "--table"])
    capsys.readouterr()
    assert code == 0
    assert main(["measure", "--project", str(project), "--no-finalize"]) == 0
    measured = capsys.readouterr().out
    assert "best 'noop' (forced)" in measured and "forced: accepted against the gate" in measured
    assert main(["runs", "--project", str(project)]) == 0
    assert "noop (forced)" in capsys.readouterr().out
    finalize = capevolve(project, finalize=True)
    assert finalize.ret == 0
    assert "best 'noop' (forced: accepted against the gate)" in finalize.stdout.str()
    report = (run_dir / "report.md").read_text()
    assert "Best: `noop` (forced: accepted against the gate)." in report
    assert "`noop`: forced: accepted against the gate (the gate: " in report  # its lineage line
    dashboard = (run_dir / "dashboard.html").read_text()
    assert "forced: accepted against the gate" in dashboard


@pytest.mark.attack(
    "laundering",
    attack=(
        "`capevolve check` (brokered for the agent) on a project whose first task id is a test task: it "
        "ran the seed on that task and printed its id and reward (\"reward 1 on task 'q00'\"), the sealed "
        "split's outcome where the optimizer reads"
    ),
    outcome="prevented: check runs and names a task of train or val, never the test split's",
)
def test_check_never_runs_or_names_a_test_task(example, projects, capsys):
    project = example("toy_calc")
    projects.edit_spec(project, "split_seed: 1", "split_seed: 5")  # q00 is then a test task
    assert main(["check", str(project)]) == 0
    said = capsys.readouterr().out
    assert "deterministic on a re-score" in said and "'q00'" not in said, said


@pytest.mark.attack(
    "laundering",
    attack=(
        "`capevolve pytest --capevolve-finalize . --co` (the broker passes `--co`): every test task's id "
        "listed (`capevolve.yaml::test::q00[seed-t0]`) without scoring, and the run's `test_opened` "
        "logged, so gating ended with nothing paid"
    ),
    outcome="refused in one line before the seal is claimed, naming the finalize to run once the run is done",
)
def test_collecting_a_finalize_names_no_test_task_and_opens_nothing(toy_calc_baseline, projects, capevolve):
    project = toy_calc_baseline  # a baseline
    result = capevolve(project, finalize=True, extra=["--co", "-q"])
    out = result.stdout.str() + result.stderr.str()
    assert "a finalize runs the whole test plan, so --collect-only is refused" in out, out
    assert (
        "::test::" not in out
        and '"test_opened"' not in (projects.run_dir(project) / "events.jsonl").read_text()
    )


@pytest.mark.attack(
    "record",
    attack=(
        "a gate's ACCEPT left unbooked (`--capevolve-commit none`), the run finalized on the seed, then "
        "`capevolve commit TAG --decision accept` once the test score was seen: the finalized run's "
        "best moved, chosen on held-out knowledge"
    ),
    outcome=(
        "a finalize with an unbooked accept of the best is refused before any rollout, naming both ways "
        "on (book it, or pass on it on the record); after a finalize, an accept is refused in one line "
        "(the finalized-run guard, at commit), naming a new run"
    ),
)
def test_an_accept_is_not_booked_in_a_finalized_run(example, projects, capevolve, capsys):
    project = example("noisy_agent")
    # two trials and no null controls: improved is accepted at n = 2 (the README's command at n = 2)
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    gate = capevolve(
        project, "improved", gate=True, extra=["--capevolve-null", "0", "--capevolve-commit", "none"]
    )
    assert gate.ret == 0 and "improved" in gate.stdout.str()
    refused = capevolve(project, finalize=True)
    assert refused.ret == 4 and "no decision books" in refused.stderr.str(), refused.stderr.str()
    assert not (projects.run_dir(project) / "seal.json").exists()
    # the second way on, as printed: pass on it on the record, then finalize
    way_on = shlex.split(refused.stderr.str().split("pass on it on the record (", 1)[1].split(")", 1)[0])
    assert way_on[:3] == ["capevolve", "commit", "improved"], way_on
    assert way_on[-5:] == ["--decision", "reject", "--reject-basis", "gate", "--force"], way_on
    assert main(way_on[1:]) == 0
    assert capevolve(project, finalize=True).ret == 0
    capsys.readouterr()
    code = main(["commit", "improved", "--project", str(project), "--decision", "accept", "--force"])
    err = capsys.readouterr().err
    assert code == 2 and "is finalized" in err and "--capevolve-new-run" in err, err
    assert '"best_id": "seed"' in (projects.run_dir(project) / "state.json").read_text()
