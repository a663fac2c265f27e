"""pytest's habits on a plain evaluation (issue 38, item 5): ``-x`` stops and still prints the
table, a FAILED line's id is the one ``--co`` lists and selects that rollout when it is owed,
``--lf`` and a recorded rollout's id say in one line why nothing is re-drawn, ``--tb=no``
shortens the FAILED lines."""

from __future__ import annotations

import json
import re
import shlex
from glob import escape
from pathlib import Path

import pytest
import run_log

from pytest_capevolve._cli.main import main

FAILED = re.compile(r"^FAILED (\S+) reward (\S+)(: .*)?$")
ROLLOUTS = re.compile(r"^rollouts: (\d+) paid, (\d+) reused")


def failed_lines(result: pytest.RunResult) -> list[re.Match[str]]:
    return [m for line in result.stdout.lines if (m := FAILED.match(line))]


def paid_reused(result: pytest.RunResult) -> tuple[int, int]:
    match = next(m for line in result.stdout.lines if (m := ROLLOUTS.match(line)))
    return int(match[1]), int(match[2])


def completing(result: pytest.RunResult) -> list[str]:
    """The printed command that completes the missing rollouts, as arguments after ``pytest``."""
    lines = result.stdout.lines
    at = next(i for i, line in enumerate(lines) if "to complete only those, run:" in line)
    command = shlex.split(lines[at + 1])
    assert command[0] == "pytest"
    return command[1:]


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["no-xdist", "xdist-2"])
def test_x_stops_at_a_failed_rollout_prints_the_table_and_a_run_without_it_completes(
    xdist, example, projects, capevolve, pytester
) -> None:
    project = example("toy_calc")
    stopped = capevolve(project, "careful", extra=["-x", *xdist])
    out = stopped.stdout.str()
    assert stopped.ret == 12, out  # incomplete (rollouts owed were not run), not pytest's 1
    stopped.stdout.fnmatch_lines(
        ["*capevolve run *", "seed *val*", "careful *val*", "rollouts: * paid, 0 reused*"]
    )
    assert "stopped early by -x at a failed rollout (a task the agent fails is data" in out
    paid, _ = paid_reused(stopped)
    records = projects.rollout_records(project)
    assert paid < 24, "-x let every rollout run"
    assert len(records) == paid, (paid, sorted(records))  # each paid rollout is on file, none more
    # it stopped at a failed rollout: one is recorded, and in one process it is the only one and
    # the last logged (nothing ran after it); under xdist the other worker may have failed one too
    failed = [key for key, record in records.items() if record["reward"] < 1]
    assert len(failed) >= 1 if xdist else len(failed) == 1, failed
    if not xdist:
        logged = [e for e in run_log.events(projects.run_dir(project)) if e["kind"] == "rollout"]
        last = logged[-1]
        assert (last["split"], last["task_id"], last["tag"], last["trial"]) == failed[0], last
    rest = completing(stopped)
    assert "-x" not in rest and "--capevolve-run-id" in rest
    completed = pytester.runpytest(*rest)
    assert completed.ret == 0, completed.stdout.str()
    assert paid_reused(completed) == (24 - paid, paid)  # nothing paid twice


def test_a_failed_lines_id_is_the_collected_node_id_and_selects_that_rollout_when_owed(
    example, projects, capevolve, pytester, capsys
) -> None:
    project = example("toy_calc")
    listed = capevolve(project, "careful", extra=["--co", "-q"])
    ids = [line for line in listed.stdout.lines if "::val::" in line]
    assert len(ids) == 24, listed.stdout.str()
    full = capevolve(project, "careful")
    assert full.ret == 0, full.stdout.str()
    failed = [m[1] for m in failed_lines(full)]
    assert failed and set(failed) <= set(ids)  # every FAILED id is one --co lists

    # pasted back in a new run (owed there): exactly those rollouts are run
    picked = [failed[0], next(i for i in ids if i not in failed)]
    some = capevolve(project, "careful", extra=["--capevolve-new-run", *picked])
    assert some.ret == 12, some.stdout.str()  # the rest is missing, and the line says how to pay it
    records = projects.rollout_records(project)
    assert {f"{k[0]}::{k[1]}[{k[2]}-t{k[3]}]" for k in records} == {i.split("::", 1)[1] for i in picked}
    rest = completing(some)
    assert not [arg for arg in rest if "::" in arg]
    assert paid_reused(pytester.runpytest(*rest)) == (22, 2)

    # pasted back where it is recorded: nothing runs, and one line says why and what works
    again = capevolve(project, "careful", extra=[failed[0]])
    assert again.ret == 0 and paid_reused(again) == (0, 24)
    tag = failed[0].rpartition("[")[2].rpartition("-t")[0]
    again.stdout.fnmatch_lines(
        [
            f"capevolve: {escape(failed[0])} is recorded already, so nothing is run for it: "
            f"*`capevolve diagnose {tag} *` shows*"
        ]
    )
    # its diagnose command names the rollout's tag and project, pasteable as printed (it said TAG)
    said = again.stdout.str().split("`capevolve diagnose ", 1)[1].split("`")[0]
    capsys.readouterr()
    assert main(["diagnose", *shlex.split(said), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tag"] == tag
    # pasted without its candidate (the best alone is evaluated): the line says how to name it
    theirs = next(i for i in failed if "[careful-" in i)
    alone = capevolve(project, extra=[theirs])
    alone.stdout.fnmatch_lines(
        [
            "*its tag 'careful' is not in it: `capevolve diagnose careful *` shows*add --capevolve-candidate *candidates/careful;*"
        ]
    )
    # the folder it names, added: the id is this session's (recorded, so nothing is run), not unknown
    folder = alone.stdout.str().split("add --capevolve-candidate ", 1)[1].split(";")[0]
    assert Path(folder).resolve() == (project / "candidates" / "careful").resolve(), folder
    named = pytester.runpytest("--capevolve-run", str(project), "--capevolve-candidate", folder, theirs)
    named.stdout.fnmatch_lines([f"capevolve: {escape(theirs)} is recorded already*"])
    # a null control's id: it has no folder to add (it said "add --capevolve-candidate with its folder")
    null = capevolve(project, extra=[theirs.replace("[careful-", "[careful-null1-")])
    null.stdout.fnmatch_lines(
        [
            "*'careful-null1' is a null control (a copy of 'careful'): only a gate session (--capevolve-gate) pays*"
        ]
    )
    assert "add --capevolve-candidate" not in null.stdout.str()
    # the diagnose command it names, pasted, reaches that tag's failures in one hop (it took two)
    said = alone.stdout.str().split("`capevolve diagnose ", 1)[1].split("`")[0]
    capsys.readouterr()
    assert main(["diagnose", *shlex.split(said), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tag"] == "careful"


def test_a_recorded_id_in_a_run_that_owes_others_runs_nothing(example, projects, capevolve) -> None:
    project = example("toy_calc")
    first = capevolve(project, "careful", extra=["-x"])
    recorded = failed_lines(first)[0][1]
    paid, _ = paid_reused(first)
    again = capevolve(project, "careful", extra=[recorded])
    assert paid_reused(again) == (0, paid)  # the owed rollouts it did not name are not paid
    assert len(projects.rollout_records(project)) == paid
    again.stdout.fnmatch_lines([f"capevolve: {escape(recorded)} is recorded already*"])


def test_last_failed_says_failed_rollouts_are_never_redrawn_and_what_to_use(
    example, capevolve, pytester
) -> None:
    project = example("toy_calc")
    args = capevolve.args(project, "careful", cache=True)
    assert pytester.runpytest(*args).ret == 0
    for flag in ("--lf", "--ff"):
        result = pytester.runpytest(*args, flag)
        assert result.ret == 0 and paid_reused(result) == (0, 24), result.stdout.str()
        result.stdout.fnmatch_lines(
            [
                f"capevolve: {flag}: no rollout the agent failed is run again; a failed rollout is "
                "recorded and never drawn again because it failed*`capevolve diagnose seed *` or "
                "`capevolve diagnose careful *` shows*--capevolve-rerun*"
            ]
        )


def test_k_in_a_run_that_owes_nothing_says_why_nothing_ran_and_where_to_look(
    example, capevolve, pytester
) -> None:
    """`-k q01` in a run whose rollouts are all recorded: pytest said only "no tests ran"."""
    project = example("toy_calc")
    assert capevolve(project, "careful").ret == 0

    again = capevolve(project, "careful", extra=["-k", "q01"])

    assert again.ret == 0 and paid_reused(again) == (0, 24), again.stdout.str()
    again.stdout.fnmatch_lines(
        [
            "capevolve: -k 'q01' selected no rollout the run owes: every one is recorded, and a recorded "
            "rollout is never drawn again; `capevolve diagnose careful * --table` or `capevolve diagnose "
            "seed * --table` shows what they did and why"
        ]
    )


def test_tb_no_prints_each_failed_rollouts_id_and_reward_only(example, capevolve) -> None:
    project = example("toy_calc")
    full = capevolve(project, "careful", extra=["--capevolve-failures", "all"])
    short = capevolve(
        project, "careful", extra=["--capevolve-failures", "all", "--capevolve-new-run", "--tb=no"]
    )
    with_feedback, without = failed_lines(full), failed_lines(short)
    assert len(without) == len(with_feedback) == full.parseoutcomes()["failed"] > 0
    assert all(m[3] for m in with_feedback) and not any(m[3] for m in without)
    assert [(m[1], m[2]) for m in without] == [(m[1], m[2]) for m in with_feedback]


def test_a_failed_lines_id_pasted_with_rerun_runs_that_rollout_under_the_fresh_tag(
    example, projects, capevolve, pytester
) -> None:
    # issue 38, a new user's trap: a FAILED id pasted with --capevolve-rerun was said to need
    # --capevolve-candidate (given: the rerun's tag is careful-r2) and "deselected by -k, -m or
    # --deselect" (none given)
    project = example("toy_calc")
    full = capevolve(project, "careful")
    theirs = next(m[1] for m in failed_lines(full) if "[careful-" in m[1])
    fresh = theirs.split("::", 1)[1].replace("[careful-", "[careful-r2-")
    again = capevolve(project, "careful", extra=[theirs, "--capevolve-rerun"])
    out = again.stdout.str()
    assert "is not in it" not in out and "-k, -m or --deselect" not in out, out
    again.stdout.fnmatch_lines(
        [
            f"capevolve: --capevolve-rerun gives each candidate a fresh tag: {escape(theirs)} as {escape(fresh)} is run*"
        ]
    )
    assert paid_reused(again)[0] == 1
    split, _, rest = fresh.partition("::")
    task, _, trial = rest.rstrip("]").partition("[careful-r2-t")
    assert (split, task, "careful-r2", int(trial)) in projects.rollout_records(project)
    missing = completing(again)  # its way on, followed literally, pays the rest of careful-r2
    assert "--capevolve-rerun" not in missing and "careful-r2" in missing
    assert paid_reused(pytester.runpytest(*missing))[0] == 11

    # an id that names nothing: what left the rollouts out is the id given, not -k/-m/--deselect
    typo = re.sub(r"::val::[^\[]+\[", "::val::nope[", theirs)
    none = capevolve(project, "careful", extra=[typo, "--capevolve-rerun"])
    assert "is not in it" not in none.stdout.str()  # its candidate is given
    none.stdout.fnmatch_lines([f"* rollouts are missing (* deselected by node id {escape(repr(typo))}); *"])


def test_last_failed_without_capevolve_says_the_failures_are_rollouts_and_what_to_type(
    example, capevolve, pytester, capsys
) -> None:
    """``pytest --lf`` typed after a session, without ``--capevolve-run``: pytest said only "N known
    failures not in selected tests" (exit 5); the line says what those are and names the command."""
    from cli_calls import run

    project = example("toy_calc")
    args = capevolve.args(project, "careful", cache=True)
    assert pytester.runpytest(*args).ret == 0

    for flag in ("--lf", "--ff"):
        plain = pytester.runpytest(flag)
        assert plain.ret == pytest.ExitCode.NO_TESTS_COLLECTED, plain.stdout.str()
        plain.stdout.fnmatch_lines(
            [
                "capevolve: * of the last failures are rollouts of a capevolve run (toy_calc/capevolve.yaml::val::*"
            ]
        )
    line = next(line for line in plain.stdout.lines if line.startswith("capevolve: "))
    pasted = shlex.split(line.split("`", 2)[1])
    assert pasted[:2] == ["capevolve", "diagnose"], pasted
    code, out, _ = run(capsys, *pasted[1:])
    assert code == 0 and '"failing_rollouts"' in out, out
