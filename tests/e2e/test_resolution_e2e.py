"""Say the resolution before paying (issue 25, item 6) on a 12-val-task project with a
reproducible agent: baseline, spend and plan state the smallest win the next decision can
accept; a reject that could not reach it says so; identical nulls give no "+0.000" MDE and
stop being paid for."""

from __future__ import annotations

import json
from fractions import Fraction

from cli_calls import run
from fix_list_project import fixing, make_fix_list, split_ids
from run_log import paid_tags


def test_the_resolution_is_said_before_paying_and_identical_nulls_stop_being_paid(
    example, projects, capevolve, capsys
):
    project = make_fix_list(example, projects)
    code, out, err = run(capsys, "baseline", str(project))
    assert code == 0, err
    # the hand-off's gates take the loop's schedule, so its resolution line does too (issue 39:
    # it named constant while its own gate command passed the loop's schedule)
    assert (
        "resolution: the smallest win the gate can accept at the next decision's level (α = 0.01562: "
        "gate_alpha_schedule addis, decision 1)" in err
    )
    assert "on these 12 val tasks: improve ≥ 6 of 12 tasks with none worse" in err
    gate = next(c for c in json.loads(out)["next"] if "--capevolve-gate" in c)
    assert gate.startswith("capevolve pytest --capevolve-run ") and " -o " not in gate, gate
    assert json.loads(out)["resolution"]["smallest_win"] == 6
    room = json.loads(out)["headroom"]  # this seed fails every val task: said, not a stop
    assert (room["verdict"], room["tasks_below_perfect"], room["val_tasks"]) == ("floor", 12, 12)
    assert json.loads(out)["recommendation"]["action"] == "continue"
    assert "headroom: " in err and "min effect: " in err
    code, out, _ = run(capsys, "spend", str(project), "--n-siblings", "3", "--json")
    three = json.loads(out)["resolution"]
    # before a first decision spend reads the run as the hand-off does (the loop's addis, 1/64), split
    # by Holm over three siblings: a win of 8 of 12 (2^-8 ≤ level < 2^-7), not constant's 1/60 (6)
    level = Fraction(three["level_exact"])
    assert (three["smallest_win"], three["reachable"]) == (8, True) and Fraction(1, 256) <= level < Fraction(
        1, 128
    )

    val = split_ids(project, "val")
    fixing(project, "two", val[:2])
    first = capevolve(
        project, "two", gate=True, extra=["--capevolve-null", "1", "--capevolve-commit", "auto"]
    )
    assert first.ret == 10
    first.stdout.fnmatch_lines(
        ["*two *REJECT*it improves 2 of 12 tasks, fewer than the 5 (with none worse)*out of reach*"]
    )

    code, out, _ = run(capsys, "plan", str(project))
    assert "MDE not estimable: the nulls are identical (reproducible agent)" in out
    assert "Δ̄ ≈ 0.0000" not in out and "+0.000" not in out
    code, out, _ = run(capsys, "spend", str(project), "--table")
    assert "MDE not estimable: the nulls are identical (reproducible agent)" in out and "+0.000" not in out

    fixing(project, "three", val[2:5])
    second = capevolve(
        project, "three", gate=True, extra=["--capevolve-commit", "auto", "--capevolve-explain"]
    )
    assert second.ret == 10
    second.stdout.fnmatch_lines(
        ["null controls: seed-null1 showed a spread of exactly 0 against 'seed'*no other null is paid for*"]
    )
    # --capevolve-explain: no power figure scaled by no noise, no "about 2 tasks (now 12)"
    second.stdout.fnmatch_lines(
        ["*three (REJECT)*", "*MDE not estimable: the nulls are identical (reproducible agent)*"]
    )
    assert "what it would take" not in second.stdout.str() and "4 times in 5" not in second.stdout.str()
    paid = paid_tags(projects.run_dir(project))
    assert "seed-null2" not in paid  # today: 12 more rollouts for nothing
    assert paid.count("seed-null1") == 12
