"""One whole agent-mode loop on examples/noisy_agent: work copies edited by a script, a gate
session that leaves its verdicts as evidence, decisions booked by `capevolve commit`."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main
from pytest_capevolve._store.rundir import RunDir

FARE_RULE = "- RULE:check-fare-class — look up the fare class before quoting any change or refund.\n"
UPSELL_RULE = "- RULE:always-upsell — offer an upgrade in every reply.\n"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    capsys.readouterr()  # drop what an in-process session printed before
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def _floats(value):
    if isinstance(value, float):
        yield value
    elif isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _floats(item)


def work_copy(capsys, project: Path, tag: str, append: str = "") -> Path:
    code, answer, _ = run_cli(capsys, "work", "new", tag, "--project", str(project))
    assert code == 0 and answer is not None and answer["parent"] == "seed"
    folder = Path(answer["path"])
    assert (folder / "JOURNAL.md").is_file()
    if append:
        with (folder / "prompt.md").open("a") as handle:
            handle.write(append)
    return folder


def test_an_agent_mode_loop_books_each_decision_once(
    typical_seed_draws, example, projects, capevolve, capsys
):
    """The baseline over two xdist workers (``--workers 2``: the loop's -n 2 case); the gate in
    process (the gate's -n 2 case is tests/e2e/test_gate_e2e.py's)."""
    project = example("noisy_agent")
    # five trials a task: the first decision's level under addis is 1/64, where three trials of the fare
    # rule were accepted under some runs' secrets and not others
    # the run made here, where its secret is pinned: the baseline's session over two workers runs in a
    # child, which would draw a secret of its own (and with it every draw of this test)
    assert capevolve(project, extra=["--collect-only"]).ret == 0
    code, handoff, err = run_cli(capsys, "baseline", str(project), "--workers", "2")
    assert code == 0 and handoff["best"]["tag"] == "seed" and handoff["best"]["full_val"] is True
    # stdout is the JSON alone; stderr has the summary, not a line per failed rollout
    assert "FAILED" not in err and "capevolve run " in err and "rollouts: 200 paid" in err, err
    assert handoff["splits"]["val"] == 40 and handoff["trials"] == 5 and len(handoff["next"]) == 6
    for hint in handoff["next"]:  # each pastes as one command: no "accept|reject" pipe, paths quoted
        words = shlex.split(hint)
        assert "|" not in words and words[0] in ("capevolve", "pytest"), hint
    assert [shlex.split(h)[-1] for h in handoff["next"][-2:]] == ["accept", "gate"]
    code, spend, _ = run_cli(capsys, "spend", str(project), "--n-siblings", "3")
    assert code == 0 and spend["afford"]["rollouts"]["total"] == 5 * 40 * 5  # 3 siblings + 2 nulls
    assert spend["afford"]["affordable"] is True and spend["recommendation"]["action"] == "continue"
    code, diagnosis, _ = run_cli(capsys, "diagnose", "seed", str(project))
    assert code == 0 and sum(diagnosis["bands"].values()) == 40
    nullcopy = work_copy(capsys, project, "nullcopy")
    better = work_copy(capsys, project, "better", FARE_RULE)
    worse = work_copy(capsys, project, "worse", UPSELL_RULE)
    with (better / "JOURNAL.md").open("a") as journal:
        journal.write("## Iteration better\nAdded the fare-class rule.\n")
    # the work copy's tag is taken: a second one would interleave two evaluations
    assert run_cli(capsys, "work", "new", "better", "--project", str(project))[0] == 2

    gated = capevolve(project, nullcopy, better, worse, gate=True, extra=["--capevolve-commit", "none"])
    assert gated.ret == 10, gated.stdout.str()
    gated.stdout.fnmatch_lines(
        ["*noise floor from null controls: seed-null1*spread*", "*verdicts written as evidence*"]
    )
    rundir = projects.run_dir(project)
    state = json.loads((rundir / "state.json").read_text())
    assert (state["best_id"], state["iterations"], state["stall"]) == ("seed", 0, 0)  # evidence only
    # the journal is the optimizer's, not the capability's: never snapshotted
    assert not (RunDir(rundir).snapshots.snapshot_dir("better") / "JOURNAL.md").exists()

    assert (
        run_cli(
            capsys,
            "commit",
            "nullcopy",
            "--project",
            str(project),
            "--decision",
            "reject",
            "--reject-basis",
            "repeat",  # its verdict scored nothing: the gate refuted nothing (basis gate is refused)
            "--note",
            "a byte-identical copy changes nothing",
        )[0]
        == 0
    )
    code, booked, err = run_cli(
        capsys,
        "commit",
        "better",
        "--project",
        str(project),
        "--decision",
        "accept",
        "--optimizer-usd",
        "0.25",
        "--optimizer-tokens",
        "900",
    )
    assert code == 0 and booked["best"] == "better" and booked["changed_files"] == ["prompt.md (changed)"], (
        err
    )
    assert (
        run_cli(
            capsys,
            "commit",
            "worse",
            "--project",
            str(project),
            "--decision",
            "reject",
            "--reject-basis",
            "micro_test_fail",
            "--note",
            "upselling made customers escalate",
        )[0]
        == 0
    )
    code, _, err = run_cli(
        capsys,
        "commit",
        "better",
        "--project",
        str(project),
        "--decision",
        "reject",
        "--reject-basis",
        "gate",
    )
    assert code == 2 and "'better' was already decided: accept" in err
    # 'better' is the best: a repaired reject left it the best, so the way on is a new run
    # the project's path, not '.': pasted from where the test runs, '.' is no project
    assert f"start a new run (`pytest --capevolve-run {project.name} --capevolve-new-run`)" in err
    assert "--force" not in err
    code, _, err = run_cli(
        capsys, "commit", "better", "--project", str(project), "--decision", "reject", "--force"
    )
    assert code == 2 and "as 'better' is the run's best (a repair would leave it so), start a new run" in err

    state = json.loads((rundir / "state.json").read_text())
    assert (state["best_id"], state["iterations"], state["stall"]) == ("better", 3, 1)
    code, spend, _ = run_cli(capsys, "spend", str(project))
    assert (spend["best"]["tag"], spend["spent"]["iterations"], spend["spent"]["stall"]) == ("better", 3, 1)
    assert spend["spent"]["optimizer_usd"] == 0.25
    assert state["spent"]["optimizer_usd"] == 0.25 and state["spent"]["optimizer_tokens"] == 900
    ledger = (rundir / "LEDGER.md").read_text().splitlines()
    rows = [line for line in ledger if line.startswith("| ") and not line.startswith("| tag")]
    assert [row.split(" | ")[0:3] for row in rows] == [
        ["| nullcopy", "seed", "reject"],
        ["| better", "seed", "accept"],
        ["| worse", "seed", "reject"],
    ]
    rejected = [json.loads(line) for line in (rundir / "rejected.jsonl").read_text().splitlines()]
    assert [r["tag"] for r in rejected] == ["nullcopy", "worse"]
    assert rejected[1]["changed_files"] == ["prompt.md (changed)"] and rejected[1]["parent"] == "seed"
    assert rejected[1]["basis"] == "micro_test_fail" and rejected[0]["changed_files"] == []
    # another tag's way on is a whole command (`commit` requires --decision, a reject its basis), and it runs
    code, _, err = run_cli(capsys, "commit", "worse", "--project", str(project), "--decision", "reject")
    # the project and the run named in it: pasted from any folder, after a newer run began, it runs
    assert code == 2 and "`capevolve commit worse " in err, err
    assert f" --run-id {rundir.name} --decision reject --reject-basis gate --force`" in err, err
    way_on = shlex.split(err.split("`")[-2])[1:]
    code, repaired, _ = run_cli(capsys, *way_on)
    assert code == 0 and repaired["decision"] == "reject" and repaired["repairs"] is not None


def test_commit_refuses_what_the_record_cannot_support(typical_seed_draws, example, capevolve, capsys):
    project = example("noisy_agent")
    copy = project / "candidates" / "copy"
    # no null controls: what commit refuses or books reads the two candidates' verdicts alone
    gated = capevolve(
        project, copy, "improved", gate=True, extra=["--capevolve-commit", "none", "--capevolve-null", "0"]
    )
    assert gated.ret == 10
    stored = RunDir.resolve(project, None, create=False).verdicts.verdict("copy")["delta_mean"]
    refusals = {
        ("copy", "accept"): "the gate did not accept 'copy'",
        ("copy", "reject"): "a reject needs --reject-basis",
        ("copy", "inconclusive"): "before it has been grown",
        ("copy", "provisional"): f"'copy' has Δ̄ = {stored:.4f} and a verdict of reject",  # not -0.01499999…
        ("improved", "provisional"): "provisional is for a verdict with Δ̄ > 0 under the bar",
        ("nope", "reject"): "unknown tag 'nope'",
        ("nope", "accept"): "once a gate session has evaluated it: pytest --capevolve-run",
    }
    for (tag, decision), message in refusals.items():
        code, _, err = run_cli(capsys, "commit", tag, "--project", str(project), "--decision", decision)
        assert code == 2 and message in err, (tag, decision, err)
    code, _, err = run_cli(
        capsys,
        "commit",
        "improved",
        "--project",
        str(project),
        "--decision",
        "accept",
        "--reject-basis",
        "gate",
    )
    assert code == 2 and "goes with a reject" in err
    # accepting against the gate is possible, and the record says so
    code, booked, _ = run_cli(
        capsys, "commit", "copy", "--project", str(project), "--decision", "accept", "--force"
    )
    assert code == 0 and booked["against_gate"] is True
    # printed statistics are rounded (6 decimals in JSON); the verdict file keeps full precision
    assert stored != round(stored, 6) and booked["delta_mean"] == round(stored, 6)
    assert all(value == round(value, 6) for value in _floats(booked))
    # `improved` was gated against the seed, which is no longer the best
    code, _, err = run_cli(capsys, "commit", "improved", "--project", str(project), "--decision", "accept")
    assert code == 2 and "against the current best 'copy'" in err


def test_accepting_a_verdict_that_scored_nothing_names_the_booking_not_another_gate(
    example, capevolve, capsys
):
    """A repeat's verdict is against the best but scored no task: gating the bytes again says the
    same, so the refusal names what to book instead of "gate it"."""
    project = example("toy_calc")
    noop = project / "candidates" / "noop"
    shutil.copytree(project / "capability", noop)
    with (noop / "prompt.md").open("a") as prompt:
        prompt.write("\nBe polite.\n")
    assert capevolve(project, noop, gate=True).ret == 10  # rejected and booked
    shutil.copytree(noop, project / "candidates" / "again")
    repeat = capevolve(project, "again", gate=True, extra=["--capevolve-commit", "none"])
    assert repeat.ret == 10 and "byte-identical to 'noop'" in repeat.stdout.str()
    code, _, err = run_cli(capsys, "commit", "again", "--project", str(project), "--decision", "accept")
    assert code == 2 and "its verdict scored no val task (reject: " in err, err
    book = shlex.split(err.split("Book what it decided (", 1)[1].split(")", 1)[0])
    assert book[:3] == ["capevolve", "commit", "again"] and "Gate it" not in err, err
    assert book[-4:] == ["--decision", "reject", "--reject-basis", "repeat"], book
    code, _, err = run_cli(  # the gate refuted nothing here: that basis is refused, naming its own
        capsys, "commit", "again", "--project", str(project), "--decision", "reject", "--reject-basis", "gate"
    )
    assert code == 2 and "--reject-basis repeat`" in err, err
    code, booked, err = run_cli(
        capsys,
        "commit",
        "again",
        "--project",
        str(project),
        "--decision",
        "reject",
        "--reject-basis",
        "repeat",
    )
    assert code == 0 and booked["decision"] == "reject" and booked["basis"] == "repeat", err


def test_two_improving_siblings_the_second_is_regated_against_the_first(example, projects, capevolve):
    project = example("noisy_agent")
    for tag in ("first", "second"):
        shutil.copytree(project / "candidates" / "improved", project / "candidates" / tag)
    # a no-op edit keeps them two candidates: the same bytes would be gated once (a repeat)
    with (project / "candidates" / "second" / "prompt.md").open("a") as prompt:
        prompt.write("\nThe second sibling.\n")
    # no null controls: what is asked is the siblings' verdicts against the best, not the noise
    # floor (five trials: at Holm's α/2 'first' is not accepted at n = 2 or 3)
    result = capevolve(project, "first", "second", gate=True, extra=["--capevolve-null", "0"])
    verdicts = {
        t: json.loads((projects.run_dir(project) / "verdicts" / f"{t}.json").read_text())
        for t in ("first", "second")
    }
    assert verdicts["first"]["decision"] == "accept" and verdicts["first"]["against"] == "seed"
    assert (
        verdicts["second"]["against"] == "first"
        and "re-gated against 'first'" in verdicts["second"]["reason"]
    )
    assert verdicts["second"]["decision"] == "reject"
    state = json.loads((projects.run_dir(project) / "state.json").read_text())
    assert state["best_id"] == "first" and state["iterations"] == 2  # auto mode booked both
    # the second was made from the seed, though its verdict compared it with `first`
    rejected = [
        json.loads(line) for line in (projects.run_dir(project) / "rejected.jsonl").read_text().splitlines()
    ]
    assert [(r["tag"], r["parent"], r["gated_against"]) for r in rejected] == [("second", "seed", "first")]
    assert rejected[0]["changed_files"] == ["prompt.md (changed)"]
    result.stdout.fnmatch_lines(["*first: booked accept*", "*second: booked reject (gate)*"])
    # the session's table of verdicts vs seed says that second's Δ̄ is against first
    result.stdout.fnmatch_lines(
        ["*capevolve verdicts vs seed (val)*", "tag *", "first  *", "second (vs first)  *"]
    )
    # what the next proposer reads names the tag it was gated against, not only its parent
    ledger = (projects.run_dir(project) / "LEDGER.md").read_text()
    assert "| second | seed (gated against first) | reject |" in ledger
    assert "| first | seed | accept |" in ledger
    from pytest_capevolve._loop.journal import earlier_rounds

    rounds = {r.tag: r for r in earlier_rounds(RunDir.resolve(project, None, create=False), "none")}
    assert rounds["second"].verdict.startswith("reject (gate) vs first (made from seed) (Δ̄=")
    assert rounds["first"].verdict.startswith("accept vs seed (Δ̄=")


def test_a_repeat_of_another_runs_reject_names_a_re_derivation_that_runs(example, capevolve, capsys):
    """The refusal's `capevolve gate TAG` must reach the run that decided TAG: from a new run the
    tag is unknown in the newest one, so the command names the run."""
    project = example("toy_calc")
    noop = project / "candidates" / "noop"
    shutil.copytree(project / "capability", noop)
    with (noop / "prompt.md").open("a") as prompt:
        prompt.write("\nBe polite.\n")
    assert capevolve(project, noop, gate=True).ret == 10  # rejected and booked in the first run
    first = RunDir.resolve(project, None, create=False).run_id
    shutil.copytree(noop, project / "candidates" / "again")
    repeat = capevolve(project, "again", gate=True, extra=["--capevolve-new-run"])
    assert repeat.ret == 10
    command = f"capevolve gate noop --run-id {first}"
    assert f"(`{command}` re-derives it" in repeat.stdout.str(), repeat.stdout.str()[-2000:]
    code, answer, err = run_cli(capsys, *command.split()[1:], "--project", str(project), "--json")
    assert code == 10 and answer is not None, err  # the earlier decision, re-derived: a reject


def test_a_sibling_a_microcase_refused_is_booked_with_the_parent_it_was_made_from(
    example, projects, capevolve
):
    """A candidate that fails a microcase is never registered; booked after a sibling's accept in
    the same round, it was recorded as made from that sibling ('improved (gated against seed)')
    though it was made from, and refused against, the seed."""
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")  # what is booked does not depend on n
    result = capevolve(project, "improved", "regressed", gate=True, extra=["--capevolve-null", "0"])
    result.stdout.fnmatch_lines(["*improved: booked accept*", "*regressed: booked reject (micro_test_fail)*"])
    rundir = projects.run_dir(project)
    (rejected,) = [json.loads(line) for line in (rundir / "rejected.jsonl").read_text().splitlines()]
    assert (rejected["tag"], rejected["parent"], rejected["basis"]) == (
        "regressed",
        "seed",
        "micro_test_fail",
    )
    assert "| regressed | seed | reject | micro_test_fail |" in (rundir / "LEDGER.md").read_text()
