"""`capevolve merge`: siblings that fixed different things, merged onto their common parent
through git's 3-way merge, then gated like any candidate (or addition by addition)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main
from pytest_capevolve._loop.merge import GitMergeFile, three_way
from pytest_capevolve._store.rundir import RunDir

FARE = "- RULE:check-fare-class — look up the fare class before quoting any change or refund.\n"
CITE = "- RULE:cite-policy — quote the policy section you relied on, so the customer can check it.\n"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    capsys.readouterr()  # drop what an in-process session printed before
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out.splitlines()[-1]) if out.strip() else None), err


def run_dir(project: Path) -> Path:
    return sorted((project / ".capevolve" / "runs").iterdir())[-1]


# -- the 3-way merge, file by file ---------------------------------------------------------------------

BASE = {"a.md": b"one\ntwo\nthree\nfour\nfive\n", "b.py": b"x = 1\n", "gone.txt": b"bye\n"}


def test_changes_to_different_files_and_distant_lines_merge_cleanly():
    current = {**BASE, "a.md": b"ONE\ntwo\nthree\nfour\nfive\n", "new.md": b"mine\n"}
    other = {**BASE, "a.md": b"one\ntwo\nthree\nfour\nFIVE\n", "b.py": b"x = 2\n"}
    del other["gone.txt"]
    with GitMergeFile() as merge_file:
        merged, conflicts = three_way(BASE, current, other, merge_file)
    assert conflicts == []
    assert merged == {"a.md": b"ONE\ntwo\nthree\nfour\nFIVE\n", "b.py": b"x = 2\n", "new.md": b"mine\n"}


def test_a_merged_file_keeps_its_last_line_ending_byte_for_byte():
    # gitpython before 3.1.28 strips the last newline of a command's stdout (and drops the
    # keyword that keeps it): the merge must not depend on stdout, nor add a newline of its own
    base, current, other = (
        b"one\ntwo\nthree\nfour\nfive",
        b"ONE\ntwo\nthree\nfour\nfive",
        b"one\ntwo\nthree\nfour\nFIVE",
    )
    with GitMergeFile() as merge_file:
        assert merge_file(base, current, other) == b"ONE\ntwo\nthree\nfour\nFIVE"
        assert (
            merge_file(base + b"\n\n", current + b"\n\n", other + b"\n\n")
            == b"ONE\ntwo\nthree\nfour\nFIVE\n\n"
        )


@pytest.mark.parametrize(
    ("current", "other"),
    [
        ({"a.md": b"one\nTWO\nthree\nfour\nfive\n"}, {"a.md": b"one\n2\nthree\nfour\nfive\n"}),  # same line
        ({"a.md": b"changed\n"}, {"a.md": None}),  # one side deleted what the other changed
        ({"c.md": b"mine\n"}, {"c.md": b"theirs\n"}),  # both added it, with other bytes
        ({"b.py": b"x = 1\x00\n"}, {"b.py": b"x = 2\x00\n"}),  # binary: git refuses to merge it
    ],
)
def test_overlapping_changes_are_conflicts_named_by_file(current, other):
    def apply(changes: dict) -> dict:
        tree = {**BASE, **{k: v for k, v in changes.items() if v is not None}}
        return {k: v for k, v in tree.items() if changes.get(k, ...) is not None}

    with GitMergeFile() as merge_file:
        merged, conflicts = three_way(BASE, apply(current), apply(other), merge_file)
    assert conflicts == sorted(set(current) | set(other))
    assert not set(conflicts) & set(merged)


def test_identical_changes_on_both_sides_are_no_conflict():
    same = {**BASE, "a.md": b"one\nTWO\nthree\nfour\nfive\n", "c.md": b"both\n"}
    with GitMergeFile() as merge_file:
        assert three_way(BASE, same, dict(same), merge_file) == (same, [])


# -- end to end on examples/noisy_agent ------------------------------------------------------------------


def _round_of_two(built, example, capevolve) -> tuple[Path, pytest.RunResult]:
    """noisy_agent after a gate of two siblings, and that session's result: built once per
    process, both tests below start from a copy (each merges and gates in its own)."""

    def make() -> tuple[Path, pytest.RunResult]:
        project = example("noisy_agent")  # no null controls: what a merge asks is the siblings' verdicts
        return project, capevolve(project, "improved", "policy", gate=True, extra=["--capevolve-null", "0"])

    return built("merge-round-of-two", "noisy_agent", make)


def test_a_merge_of_two_helping_siblings_is_accepted_over_either_alone(
    typical_seed_draws, built, example, capevolve, capsys
):
    """In process: a work copy gated under -n 2 is test_an_agent_mode_loop_books_each_decision_once's."""
    project, round_ = _round_of_two(built, example, capevolve)
    # the sibling problem: improved is accepted; policy, re-gated against it, can only replace it
    assert round_.ret == 10, round_.stdout.str()
    round_.stdout.fnmatch_lines(["*improved: booked accept*", "*policy: booked reject (gate)*"])
    for tag in ("improved", "policy"):  # each helps on its own
        code, verdict, _ = cli(capsys, "gate", tag, "--project", str(project), "--against", "seed", "--json")
        if tag == "improved":  # gated against seed: the decision itself
            assert code == 0 and verdict["decision"] == "accept", verdict
        else:  # decided against improved: against seed is a what-if (exit 14), never an accept
            assert code == 14 and verdict["what_if"]["answer"] == "accept", verdict

    code, answer, _ = cli(
        capsys, "merge", "improved", "policy", "--tag", "merged", "--project", str(project), "--json"
    )
    assert code == 0, answer
    assert answer["parent"] == "seed" and answer["merged_from"] == ["improved", "policy"]
    assert "note" not in answer  # not byte-identical to either parent
    assert answer["changes"] == {"improved": ["prompt.md"], "policy": ["skills/policy.md"]}
    work = Path(answer["path"])
    assert work == run_dir(project) / "work" / "merged"
    assert (work / "prompt.md").read_bytes() == (project / "candidates/improved/prompt.md").read_bytes()
    assert (work / "skills/policy.md").read_bytes() == (
        project / "candidates/policy/skills/policy.md"
    ).read_bytes()
    assert (work / "tools/reply.py").read_bytes() == (project / "capability/tools/reply.py").read_bytes()
    assert FARE in (work / "prompt.md").read_text() and CITE in (work / "skills/policy.md").read_text()
    # a tag names one candidate forever: the same merge again is refused
    assert cli(capsys, "merge", "improved", "policy", "--tag", "merged", "--project", str(project))[0] == 2

    gated = capevolve(project, work, gate=True, extra=["--capevolve-null", "0"])  # the merged work copy
    assert gated.ret == 0, gated.stdout.str()
    gated.stdout.fnmatch_lines(["*merged*ACCEPT*", "*merged: booked accept*"])
    verdict = json.loads((run_dir(project) / "verdicts" / "merged.json").read_text())
    assert (
        verdict["against"] == "improved" and verdict["n_tasks"] == 40 and verdict["coverage"]["paired"] == 1.0
    )
    code, over_policy, _ = cli(
        capsys, "gate", "merged", "--project", str(project), "--against", "policy", "--json"
    )
    # decided against improved: against policy is a what-if (exit 14) whose answer is accept
    assert code == 14 and over_policy["what_if"]["answer"] == "accept", over_policy

    ledger = (run_dir(project) / "LEDGER.md").read_text()
    assert "| merged | improved + policy (merged onto seed) (gated against improved) | accept |" in ledger
    events = [json.loads(line) for line in (run_dir(project) / "events.jsonl").read_text().splitlines()]
    booked = next(e for e in events if e["kind"] == "decision" and e["tag"] == "merged")
    assert booked["merged_from"] == ["improved", "policy"] and booked["parent"] == "seed"
    assert sorted(booked["changed_files"]) == ["prompt.md (changed)", "skills/policy.md (changed)"]


def test_integrate_keeps_only_the_additions_that_clear_the_gate(
    typical_seed_draws, built, example, capevolve, capsys
):
    project, round_ = _round_of_two(built, example, capevolve)
    assert round_.ret == 10, round_.stdout.str()
    # a third sibling that changes a third file and helps nothing
    code, created, _ = cli(capsys, "work", "new", "tweak", "--from", "seed", "--project", str(project))
    assert code == 0
    reply = Path(created["path"]) / "tools" / "reply.py"
    reply.write_text(reply.read_text().replace("Reply helpers", "Reply helpers (tidied)"))
    # overlapping edits of one line do not merge: refused naming the file, nothing written
    code, clash, _ = cli(capsys, "work", "new", "clash", "--from", "seed", "--project", str(project))
    prompt = Path(clash["path"]) / "prompt.md"
    prompt.write_text(prompt.read_text() + "- RULE:always-upsell — offer an upgrade in every reply.\n")
    code, _, err = cli(capsys, "merge", "improved", "clash", "--tag", "nope", "--project", str(project))
    assert code == 2 and "prompt.md" in err and "do not merge cleanly" in err
    assert not (run_dir(project) / "work" / "nope").exists()

    code, answer, err = cli(
        capsys,
        "merge",
        "improved",
        "tweak",
        "policy",
        "--tag",
        "merged",
        "--integrate",
        "--project",
        str(project),
        "--json",
    )
    assert code == 0, err
    steps = answer["steps"]
    assert [s["outcome"] for s in steps] == ["kept", "dropped", "kept"]
    assert steps[0]["tag"] is None and "byte-identical to the best 'improved'" in steps[0]["reason"]
    assert (
        steps[1]["tag"] == "merged-2"
        and steps[1]["decision"] == "reject"
        and steps[1]["files"] == ["tools/reply.py"]
    )
    assert (
        steps[1]["booked"] == "reject"
        and steps[2]["booked"] == "accept"
        and steps[2]["tag"] == "merged-3"
        and steps[2]["decision"] == "accept"
        and steps[2]["against"] == "improved"
    )
    assert answer["kept"] == ["improved", "policy"] and answer["dropped"] == ["tweak"]
    assert answer["result"] == answer["best"] == "merged-3"
    rundir = run_dir(project)
    # the kept candidate holds the kept additions only: the dropped tweak is not in it
    kept = RunDir(rundir).snapshots.snapshot_dir("merged-3")
    assert (kept / "tools/reply.py").read_bytes() == (project / "capability/tools/reply.py").read_bytes()
    assert FARE in (kept / "prompt.md").read_text() and CITE in (kept / "skills/policy.md").read_text()
    assert (rundir / "merge" / "merged" / "merged-2.log").is_file()
    ledger = (rundir / "LEDGER.md").read_text()
    assert (
        "| merged-2 | improved + tweak (merged onto seed) (gated against improved) | reject | gate |"
        in ledger
    )
    assert "| merged-3 | improved + policy (merged onto seed) (gated against improved) | accept |" in ledger
    state = json.loads((rundir / "state.json").read_text())
    assert state["best_id"] == "merged-3"


def test_integrate_gates_an_evaluated_candidate_as_itself(toy_calc_baseline, capevolve, capsys):
    """A candidate the run evaluated but never gated is the first addition's bytes: its step
    (``m-1``) was refused as a repeat of them and the addition dropped, never gated."""
    project = toy_calc_baseline
    code, _, err = cli(capsys, "merge", "careful", "same", "--tag", "m", "--project", str(project))
    assert code == 2 and "evaluate its folder first (`pytest --capevolve-run " in err, err
    assert capevolve(project, "careful").ret == 0  # the refusal's first way on: evaluated, not gated
    code, _, err = cli(capsys, "merge", "careful", "same", "--tag", "m", "--project", str(project))
    assert code == 2 and "'same' has neither" in err, err
    way_on = err.split("to edit: `", 1)[1].split("`")[0].split()
    assert cli(capsys, *way_on[1:])[0] == 0  # `capevolve work new same PROJECT`, left as the best's copy

    code, answer, err = cli(
        capsys, "merge", "careful", "same", "--tag", "m", "--integrate", "--project", str(project), "--json"
    )

    assert code == 0, err
    first, second = answer["steps"]
    assert first["tag"] == "careful" and first["outcome"] == "kept" and first["booked"] == "accept", first
    assert second["outcome"] == "no_change"
    assert answer["best"] == "careful"


def test_merge_refusals(example, capevolve, capsys):
    project = example("toy_calc")
    assert capevolve(project, "careful").ret == 0
    for argv, message in (
        (["merge", "careful", "--tag", "x"], "at least two candidates"),
        (["merge", "careful", "careful", "--tag", "x"], "named twice"),
        # with the way on: a tag with no folder of its own is made a work copy (pasted in the test below)
        (["merge", "careful", "ghost", "--tag", "x"], "to edit: `capevolve work new ghost "),
        (["merge", "careful", "seed", "--tag", "a__b"], "tag 'a__b' is not usable"),
    ):
        code, _, err = cli(capsys, *argv, "--project", str(project))
        assert code == 2 and message in err, err
        assert len(err.strip().splitlines()) == 1
    assert capevolve(project, finalize=True).ret == 0
    code, _, err = cli(
        capsys, "merge", "careful", "seed", "--tag", "y", "--integrate", "--project", str(project)
    )
    assert code == 2 and "is finalized" in err
    assert not (run_dir(project) / "work" / "y-1").exists()  # refused before anything was built
