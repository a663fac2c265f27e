"""Subset screens and grow, end to end on examples/noisy_agent: a regression killed at tier 1
for a fraction of full val's rollouts, an improvement promoted then accepted on full val, the
screen ledger against the files on disk, the gate refusing a subset's coverage, and a
provisional candidate grown twice then refused a third time."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
import run_log

from pytest_capevolve._cli.main import main
from pytest_capevolve._store.rundir import RunDir

VAL_TASKS, TRIALS = 40, 5


def rollout_files(run: Path, tag: str) -> int:
    return len(run_log.rollout_files(run, tag))


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


NAMED = ["--capevolve-run-id", "screens"]


@pytest.fixture
def screens_baseline(built, example, capevolve, typical_seed_draws) -> Path:
    """examples/noisy_agent without its no-upsell microcase (it would refuse the regression before
    any rollout: screened instead), after the seed's val rollouts in the run named ``screens`` (the
    subset is seeded by the run id, a new one each run: a named run makes it the test's own; tier 1
    kills ``regressed`` in about 80 % of run ids, tier 2 in all). A plain run, in process, not what
    is screened: built once per process (``built``), a copy for each mode of the test, under
    :data:`TYPICAL_SEED_SECRET` (a gain at few trials is the claim)."""

    def make() -> tuple[Path, None]:
        project = example("noisy_agent")
        (project / "microcases" / "policy-text.yaml").unlink()
        (project / ".capevolve" / "runs" / "screens").mkdir(parents=True)
        assert capevolve(project, extra=NAMED).ret == 0
        return project, None

    return built("noisy-agent-screens-baseline", "noisy_agent", make)[0]


def test_a_regression_is_killed_at_tier_one_and_an_improvement_promoted_then_accepted(
    screens_baseline, projects, capevolve, capsys, xdist_args
) -> None:
    project, named = screens_baseline, NAMED
    # the kill is the screen's -n 2 case, the promotion and the gate after it run in process (the
    # gate's -n 2 case is tests/e2e/test_gate_e2e.py's)
    run = projects.run_dir(project)
    assert rollout_files(run, "seed") == VAL_TASKS * TRIALS

    killed = capevolve(project, "regressed", extra=["--capevolve-screen", "1", *xdist_args, *named])
    assert killed.ret == 10, killed.stdout.str()
    killed.stdout.fnmatch_lines(["*screen regressed (tier1, 10 tasks): KILL*proven harm*"])
    screen = json.loads((run / "screens" / "regressed__tier1.json").read_text())
    fired_regressed = rollout_files(run, "regressed")
    assert fired_regressed == screen["rollouts_fired"] == 10 * TRIALS < VAL_TASKS * TRIALS
    assert rollout_files(run, "seed") == VAL_TASKS * TRIALS  # the best's side was not paid again
    assert screen["decision"] == "kill" and screen["basis"] == "harm" and screen["p_value"] <= 0.05
    assert len(screen["ids"]) == 10 and screen["full_val_rollouts"] == VAL_TASKS * TRIALS
    assert screen["breakeven_kill_rate"] == pytest.approx(fired_regressed / (VAL_TASKS * TRIALS))
    assert not (run / "verdicts" / "regressed.json").exists()  # a screen writes no verdict
    booked = [
        e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["kind"] == "decision"
    ]
    assert [(e["tag"], e["decision"], e["basis"]) for e in booked] == [("regressed", "reject", "screen_kill")]
    assert booked[0]["delta_mean"] == screen["delta_mean"] < 0  # the ledger row carries the screen's numbers

    # the gate never sees a screen's numbers: the subset's coverage is below min_coverage
    code, out, _ = run_cli(capsys, "gate", "regressed", "--project", str(project), "--json")
    verdict = json.loads(out.strip().splitlines()[-1])
    assert code == 11 and verdict["decision"] == "indecisive" and verdict["basis"] == "coverage"
    assert verdict["coverage"]["candidate"] == pytest.approx(10 / VAL_TASKS)

    promoted = capevolve(project, "improved", extra=["--capevolve-screen", "1", *named])
    assert promoted.ret == 0, promoted.stdout.str()
    promoted.stdout.fnmatch_lines(
        ["*screen improved (tier1, 10 tasks): PROMOTE*", "*promoted, not accepted*"]
    )
    screen = json.loads((run / "screens" / "improved__tier1.json").read_text())
    fired_improved = rollout_files(run, "improved")
    ledger = screen["ledger"]
    assert (ledger["kills"], ledger["promotes"]) == (1, 1)
    assert ledger["fired"] == fired_regressed + fired_improved == 2 * 10 * TRIALS
    assert ledger["saved"] == VAL_TASKS * TRIALS  # the kill's full val, never paid
    assert ledger["net_rollouts"] == ledger["saved"] - ledger["fired"]
    assert rollout_files(run, "regressed") == fired_regressed  # nothing more paid for the kill

    # no null controls: what is asked is that the gate reuses the screen's rollouts and accepts
    gated = capevolve(project, "improved", gate=True, extra=["--capevolve-null", "0", *named])
    assert gated.ret == 0, gated.stdout.str()
    gated.stdout.fnmatch_lines(["improved*ACCEPT*", "improved: booked accept"])
    assert rollout_files(run, "improved") == VAL_TASKS * TRIALS  # the screen's 50 reused, 150 paid

    code, out, _ = run_cli(capsys, "spend", str(project))
    assert code == 0 and json.loads(out)["screens"] == ledger
    assert (
        "- subset screens: 1 killed, 1 promoted; 100 rollouts fired, 200 saved, net +100"
        in (run / "report.md").read_text()
    )


def test_a_screen_that_kills_nothing_is_reported_as_pure_overhead_and_commit_checks_the_kill(
    example, projects, capevolve, capsys, pytester
) -> None:
    project = example("noisy_agent")
    trials = 2  # not the example's five: the ledger's arithmetic is the same at any n
    projects.edit_spec(project, "num_trials: 5", f"num_trials: {trials}")
    assert capevolve(project).ret == 0
    run = projects.run_dir(project)
    screened = capevolve(project, "improved", extra=["--capevolve-screen", "2", "--capevolve-commit", "none"])
    assert screened.ret == 0, screened.stdout.str()
    screen = json.loads((run / "screens" / "improved__tier2.json").read_text())
    paid = rollout_files(run, "improved")
    assert (
        screen["decision"] == "promote"
        and screen["ledger"]["net_rollouts"] == -paid == -len(screen["ids"]) * trials
    )
    screened.stdout.fnmatch_lines([f"*screening was pure overhead: {paid} rollouts more than it saved*"])
    # a screen_kill reject needs a screen that killed it
    code, _, err = run_cli(
        capsys,
        "commit",
        "improved",
        "--decision",
        "reject",
        "--reject-basis",
        "screen_kill",
        "--project",
        str(project),
    )
    assert code == 2 and "needs a screen that killed 'improved'" in err
    # its way on, pasted: a screen of the folder registered as 'improved' (it named '--capevolve-candidate DIR')
    pasted = shlex.split(err.split("Screen it (", 1)[1].split(") or give")[0])
    assert pasted[0] == "pytest", pasted
    again = pytester.runpytest(*pasted[1:], "--capevolve-commit", "none", "-p", "no:cacheprovider")
    assert again.ret in (0, 10) and len(list((run / "screens").glob("improved__*.json"))) == 2, (
        again.stdout.str()
    )
    # the bundled no-upsell microcase refuses `regressed` before any rollout: no screen, no verdict
    refused = capevolve(project, "regressed", extra=["--capevolve-screen", "1"])
    assert refused.ret == 10, refused.stdout.str()
    refused.stdout.fnmatch_lines(["*regressed: refused before any rollout, so not screened*"])
    assert not (run / "verdicts" / "regressed.json").exists()
    assert not list((run / "screens").glob("regressed__*")) and rollout_files(run, "regressed") == 0


def test_a_provisional_candidate_is_grown_twice_at_the_pooled_n_then_refused(
    typical_seed_draws, example, projects, capevolve, capsys
) -> None:
    project = example("noisy_agent")
    # a byte-identical copy: its draws differ like a real agent's, and under TYPICAL_SEED_SECRET this
    # tag's land at Δ̄ > 0 under the bar (provisional) and stay inconclusive when grown (the tag was
    # picked for that among near1..near22: a test owns its run's secret, an optimizer cannot read it)
    shutil.copytree(project / "candidates" / "copy", project / "candidates" / "near18")
    null = ["--capevolve-null", "1"]
    gated = capevolve(
        project, "near18", gate=True, extra=["--capevolve-null", "0", "--capevolve-commit", "none"]
    )
    assert gated.ret == 10
    refused = capevolve(project, extra=["--capevolve-candidate", "near18", "--capevolve-grow"])
    assert refused.ret == 4
    refused.stderr.fnmatch_lines(["*growth is off (grow_max_looks: 1)*"])
    projects.edit_spec(project, "max_metric_calls: 20000", "max_metric_calls: 20000\ngrow_max_looks: 3")
    # its first look spent all of α: growing it now would inflate false accepts
    refused = capevolve(project, extra=["--capevolve-candidate", "near18", "--capevolve-grow"])
    assert refused.ret == 4
    refused.stderr.fnmatch_lines(["*without a reserve for growth*"])

    gated = capevolve(project, "near18", gate=True, extra=[*null, "--capevolve-new-run"])
    run = projects.run_dir(project)
    verdict = json.loads((run / "verdicts" / "near18.json").read_text())
    assert verdict["decision"] == "reject" and verdict["delta_mean"] > 0, verdict["reason"]
    assert verdict["details"]["looks"]["look"] == 1 and verdict["alpha"] == 0.025  # α/2 kept in reserve
    gated.stdout.fnmatch_lines(["near18*PROVISIONAL*", "near18: booked provisional"])
    assert gated.ret == 13  # provisional, not rejected: a grow is left
    assert not [line for line in gated.stdout.lines if line.startswith("near18 ") and "REJECT" in line]

    for look, trials in ((2, 10), (3, 15)):
        grown = capevolve(project, extra=["--capevolve-candidate", "near18", "--capevolve-grow"])
        assert grown.ret == (13 if look < 3 else 10), grown.stdout.str()  # inconclusive at the last
        verdict = json.loads((run / "verdicts" / "near18.json").read_text())
        assert verdict["trials"] == trials and verdict["n_tasks"] == VAL_TASKS
        assert verdict["details"]["looks"]["look"] == look and verdict["alpha"] == 0.0125
        assert f"look {look} of 3 at the pooled {trials} trials per task" in verdict["reason"]
        # trial indices continue for both arms: the pairing holds
        for tag in ("near18", "seed"):
            assert rollout_files(run, tag) == VAL_TASKS * trials
        assert json.loads(RunDir(run).rollout_path("val", "n10", "near18", trials - 1).read_text())[
            "seed"
        ] == (100 + trials - 1)
        assert rollout_files(run, "seed-null1") == VAL_TASKS * TRIALS  # the nulls are not grown
        # ... and are compared with the seed on the trials both have (t0–t4): the bar is the
        # null's own paired Δ̄, as its first gate (and `capevolve gate seed-null1`) found it
        null = json.loads((run / "verdicts" / "seed-null1.json").read_text())
        assert verdict["null_spread"] == pytest.approx(abs(null["delta_mean"]))
    grown.stdout.fnmatch_lines(["near18: booked inconclusive"])
    # re-derived later from the same rollouts, the grown verdict is the same verdict
    code, out, _ = run_cli(capsys, "gate", "near18", "--project", str(project), "--json")
    again = json.loads(out.strip().splitlines()[-1])
    keys = ("trials", "alpha", "p_exact", "decision", "delta_mean", "null_spread")
    assert code == 10 and {k: again[k] for k in keys} == {k: verdict[k] for k in keys}
    third = capevolve(project, extra=["--capevolve-candidate", "near18", "--capevolve-grow"])
    assert third.ret == 4
    third.stderr.fnmatch_lines(
        [
            "*'near18' has been grown 2 time(s) (3 looks of grow_max_looks 3): no more grows*already booked: inconclusive*"
        ]
    )
    assert "capevolve commit" not in third.stderr.str()  # booked by --capevolve-commit auto
    again = capevolve(project, "near18", gate=True)
    assert again.ret == 4
    again.stderr.fnmatch_lines(["*'near18' was grown against 'seed' (look 3)*already booked: inconclusive*"])
    assert "grow it again" not in again.stderr.str() and "book it" not in again.stderr.str()
    # a plain evaluation pools (and counts as reused) the first num_trials of the grown seed
    plain = capevolve(project)
    assert plain.ret == 0, plain.stdout.str()
    seed_row = next(line.split() for line in plain.stdout.lines if line.startswith("seed "))
    assert seed_row[3] == str(TRIALS) and seed_row[-3] == str(VAL_TASKS * TRIALS), seed_row  # reused
    dashboard = (run / "dashboard.html").read_text()
    assert "grown: near18 15, seed 15 trials per task" in dashboard
    assert "near18 vs seed: INCONCLUSIVE" in dashboard and "near18 vs seed: REJECT" not in dashboard
    decisions = [
        e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["kind"] == "decision"
    ]
    assert [e["decision"] for e in decisions] == ["provisional", "provisional", "inconclusive"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--capevolve-screen", "4"], "*--capevolve-screen takes a tier, 1, 2 or 3*got '4'*"),
        (["--capevolve-screen", "1"], "*--capevolve-screen takes exactly one --capevolve-candidate*"),
        (
            ["--capevolve-screen-ids", "a,b"],
            "*--capevolve-screen-ids was dropped: screen a tier, --capevolve-screen 1|2|3*",
        ),
        (["--capevolve-grow", "--capevolve-screen", "1"], "*separate sessions; run one*"),
        (
            ["--capevolve-candidate", "x", "--capevolve-screen", "1", "--capevolve-gate"],
            "*--capevolve-gate does not*",
        ),
        (
            ["--capevolve-candidate", "careful", "--capevolve-screen", "1"],
            "*the best 'seed' has no val rollouts*",
        ),
        (
            ["--capevolve-candidate", "careful", "--capevolve-grow"],
            "*the new run (not kept): nothing was gated yet; gate the candidate first*",
        ),
    ],
)
def test_screen_and_grow_flags_refuse_bad_input_in_one_line(example, capevolve, flags, message) -> None:
    project = example("toy_calc")
    flags = [str(project / "candidates" / f) if f == "careful" else f for f in flags]
    refused = capevolve(project, extra=flags)
    assert refused.ret == 4
    refused.stderr.fnmatch_lines([message])
    assert not list((project / ".capevolve" / "runs").glob("*/rollouts"))  # nothing paid, no run left
