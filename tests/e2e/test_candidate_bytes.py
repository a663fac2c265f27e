"""A candidate is its bytes: a refuted candidate copied under a new tag is not gated again at a
fresh α (issue 25's repro), and `capevolve gate TAG` re-derives the level the decision had."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_calls import run
from fix_list_project import fixing, make_fix_list, split_ids
from run_log import paid_tags, rollout_files


def _round_of_three(built, example, projects, capevolve) -> tuple[Path, list[str]]:
    """The fix-list project after a 3-sibling round booked by the session: ``helpful`` fixes 5
    val tasks (p = 1/32), rejected at Holm's α/3 = 1/60; two weak siblings fix one each. Built
    once per process (tests/conftest.py's ``built``): each test gets a copy."""

    def make() -> tuple[Path, list[str]]:
        project = make_fix_list(example, projects)
        assert capevolve(project).ret == 0  # the seed, and the splits frozen
        val = split_ids(project, "val")
        assert len(val) == 12
        fixing(project, "helpful", val[:5])
        fixing(project, "weak1", val[5:6])
        fixing(project, "weak2", val[6:7])
        gated = capevolve(
            project, "helpful", "weak1", "weak2", gate=True, extra=["--capevolve-commit", "auto"]
        )
        assert gated.ret == 10, gated.stdout.str()
        return project, val

    return built("fix-list-round-of-three", "fixes", make)


def _verdict(project: Path, projects, tag: str) -> dict:
    return json.loads((projects.run_dir(project) / "verdicts" / f"{tag}.json").read_text())


@pytest.mark.attack(
    "laundering",
    attack="refuted bytes copied under a new tag, or `--capevolve-rerun`, to escape the family correction",
    outcome=(
        "refused: a candidate is its bytes; the repeat is booked without a rollout, naming the earlier "
        "tag and its level"
    ),
)
def test_a_refuted_candidate_copied_under_a_new_tag_is_refused_not_regated(
    built, example, projects, capevolve, capsys
):
    project, _ = _round_of_three(built, example, projects, capevolve)
    helpful = _verdict(project, projects, "helpful")
    assert (helpful["decision"], helpful["p_exact"]) == ("reject", "1/32")
    assert helpful["details"]["family"]["level_exact"] == "1/60"

    code, answer, _ = run(
        capsys, "work", "new", "helpful2", "--from", "helpful", "--project", str(project), "--json"
    )
    assert code == 0
    copy = Path(json.loads(answer)["path"])
    before = sorted(p.name for p in (projects.run_dir(project) / "rollouts" / "val").iterdir())
    again = capevolve(project, copy, gate=True, extra=["--capevolve-commit", "auto"])
    # today: ACCEPT at 0.05 and booked as best; now refused in one line naming the earlier tag
    # and the level its decision had, before anything is paid
    assert again.ret == 10, again.stdout.str()
    again.stdout.fnmatch_lines(
        [
            "helpful2 *REJECT*never paid for: candidate 'helpful2' is byte-identical to 'helpful' "
            "*rejected (α = 0.01667, Holm over 3 siblings)*",
            "helpful2: booked reject (repeat)",
        ]
    )
    rundir = projects.run_dir(project)
    assert sorted(p.name for p in (rundir / "rollouts" / "val").iterdir()) == before  # nothing paid
    assert json.loads((rundir / "state.json").read_text())["best_id"] == "seed"
    assert not (rundir / "candidates" / "helpful2").exists()
    assert _verdict(project, projects, "helpful2")["details"]["repeats"] == "helpful"

    # --capevolve-rerun is a fresh measurement, never a fresh decision on refuted bytes
    rerun = capevolve(
        project, "helpful", gate=True, extra=["--capevolve-rerun", "--capevolve-commit", "auto"]
    )
    assert rerun.ret == 10
    rerun.stdout.fnmatch_lines(["helpful-r2 *REJECT*byte-identical to 'helpful' *rejected*"])
    assert sorted(p.name for p in (rundir / "rollouts" / "val").iterdir()) == before


@pytest.mark.attack(
    "laundering",
    attack=(
        "refuted bytes re-proposed with a trailing space, CRLF line endings or blank lines at the end "
        "(or, before issue 40's attack, blank lines at the start, a byte-order mark or zero-width "
        "characters: accepted at α = 0.05), gated alone at the full α"
    ),
    outcome=(
        "refused: the same text (line endings, trailing whitespace, leading blank lines and zero-width "
        "characters folded) is the same candidate; an added file or a comment is a real change, priced "
        "by the loop's α schedule"
    ),
)
@pytest.mark.parametrize(
    "edit",
    [
        lambda text: text + "   ",  # a trailing space
        lambda text: text.replace("\n", "\r\n"),  # CRLF line endings
        lambda text: text + "\n\n",  # blank lines at the end
        lambda text: "\n \n" + text,  # blank lines at the start
        lambda text: "\ufeff" + text,  # a byte-order mark
        lambda text: text.replace(" ", " \u200b", 3).replace("\n", "\u2060\n", 1),  # zero-width marks
    ],
    ids=["trailing-space", "crlf", "blank-lines", "leading-blank-lines", "bom", "zero-width"],
)
def test_a_refuted_candidate_re_proposed_with_invisible_edits_is_refused_not_regated(
    built, example, projects, capevolve, edit
):
    """The red team's laundering of a Holm reject: the same prompt with a trailing space (or CRLF,
    or a newline more) gated alone was new bytes, paid again and accepted at α = 0.05."""
    project, _ = _round_of_three(built, example, projects, capevolve)
    variant = project / "candidates" / "helpful-again"
    shutil.copytree(project / "candidates" / "helpful", variant)
    changed = [path for path in sorted(variant.rglob("*")) if path.is_file()][0]
    changed.write_bytes(edit(changed.read_text()).encode())
    rundir = projects.run_dir(project)
    before = sorted(p.name for p in (rundir / "rollouts" / "val").iterdir())
    again = capevolve(project, "helpful-again", gate=True, extra=["--capevolve-commit", "auto"])
    assert again.ret == 10, again.stdout.str()
    again.stdout.fnmatch_lines(
        [
            "helpful-again *REJECT*never paid for: candidate 'helpful-again' differs from 'helpful' only "
            "in line endings or trailing whitespace*rejected (α = 0.01667, Holm over 3 siblings)*",
        ]
    )
    assert sorted(p.name for p in (rundir / "rollouts" / "val").iterdir()) == before  # nothing paid
    assert json.loads((rundir / "state.json").read_text())["best_id"] == "seed"


@pytest.mark.attack(
    "laundering",
    attack=(
        "refuted bytes with trailing whitespace gated alone in a new run (`--capevolve-new-run`): the "
        "text hash was compared with this run's decided tags only (a Holm reject, p = 1/32, was accepted "
        "at α = 0.05 and booked)"
    ),
    outcome=(
        "refused: the text hash is also compared with the decisions of the project's other runs on this "
        "val whose folders are here; nothing paid, booked reject (repeat) naming the earlier run"
    ),
)
def test_refuted_bytes_with_a_trailing_space_in_a_new_run_are_refused(built, example, projects, capevolve):
    project, _ = _round_of_three(built, example, projects, capevolve)
    first = projects.run_dir(project).name
    prompt = project / "candidates" / "helpful" / "prompt.md"
    prompt.write_text(prompt.read_text() + "  \n\n")
    again = capevolve(
        project, "helpful", gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "auto"]
    )
    # before: ACCEPT at α = 0.05 (p = 1/32), booked accept, exit 0
    assert again.ret == 10, again.stdout.str()
    again.stdout.fnmatch_lines(
        [
            "helpful *REJECT*never paid for: candidate 'helpful' differs from 'helpful' only in line "
            f"endings or trailing whitespace, rejected (α = 0.01667, Holm over 3 siblings) in run {first}*",
            "helpful: booked reject (repeat)",
        ]
    )
    assert not rollout_files(projects.run_dir(project), "helpful")


@pytest.mark.attack(
    "laundering",
    attack=(
        "unconfined: the deciding run's folder moved out of the project, then the refuted bytes with a "
        "trailing space gated alone in a new run: the text hash was compared only with runs whose "
        "folders are here (the project's memory held the exact bytes alone): accepted at α = 0.05 and "
        "booked"
    ),
    outcome=(
        "refused: the project's memory (`decisions.jsonl`) keeps each booked decision's text hash too; "
        "nothing paid, booked reject (repeat) naming the earlier run"
    ),
)
def test_refuted_bytes_with_a_trailing_space_are_refused_after_their_run_folder_moved_out(
    built, example, projects, capevolve, tmp_path
):
    project, _ = _round_of_three(built, example, projects, capevolve)
    first = projects.run_dir(project)
    first.rename(tmp_path / "elsewhere")
    prompt = project / "candidates" / "helpful" / "prompt.md"
    prompt.write_text(prompt.read_text() + "  \n\n")
    again = capevolve(
        project, "helpful", gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "auto"]
    )
    assert again.ret == 10, again.stdout.str()  # before: 0, ACCEPT at α = 0.05, booked
    again.stdout.fnmatch_lines(
        [
            "helpful *REJECT*never paid for: candidate 'helpful' differs from 'helpful' only in line "
            f"endings or trailing whitespace, rejected (α = 0.01667, Holm over 3 siblings) in run {first.name}*",
            "helpful: booked reject (repeat)",
        ]
    )
    assert not rollout_files(projects.run_dir(project), "helpful")


@pytest.mark.attack(
    "laundering",
    attack="refuted bytes copied under a new tag, or `--capevolve-rerun`, to escape the family correction",
)
def test_two_siblings_with_the_same_bytes_are_gated_once(fix_list_baseline, projects, capevolve):
    project = fix_list_baseline
    val = split_ids(project, "val")
    fixing(project, "one", val[:1])
    fixing(project, "twin", val[:1])
    gated = capevolve(project, "one", "twin", gate=True)
    gated.stdout.fnmatch_lines(["twin *REJECT*byte-identical to 'one'*a sibling in this same session*"])
    paid = paid_tags(projects.run_dir(project))
    assert paid.count("one") == 12 and "twin" not in paid
    # alone in its family: 'one' was decided at α, not at a Holm share of two
    assert "family" not in _verdict(project, projects, "one")["details"]


@pytest.mark.attack(
    "laundering",
    attack="an optimizer's output identical to an earlier candidate (a crash's unchanged copy)",
)
def test_an_unchanged_copy_of_the_best_is_not_paid_for(fix_list_baseline, projects, capevolve, capsys):
    project = fix_list_baseline
    code, answer, _ = run(capsys, "work", "new", "same", "--project", str(project), "--json")
    assert code == 0
    same = capevolve(project, Path(json.loads(answer)["path"]), gate=True)
    assert same.ret == 10
    same.stdout.fnmatch_lines(["same *REJECT*byte-identical to 'seed' *the best*nothing to gate*"])
    paid = paid_tags(projects.run_dir(project))
    assert paid and set(paid) == {"seed"}  # no null control, no copy paid for


@pytest.mark.attack(
    "laundering",
    attack="`capevolve gate TAG` at α = 0.05 to print ACCEPT for a tag rejected at its Holm level",
    outcome="prevented: re-derived at the level it had; an explicit `--alpha` says it is not that level",
)
def test_capevolve_gate_rederives_the_holm_level_the_decision_had(
    built, example, projects, capevolve, capsys
):
    project, _ = _round_of_three(built, example, projects, capevolve)
    code, out, _ = run(capsys, "gate", "helpful", "--project", str(project))
    # today: ACCEPT (re-derived at α = 0.05); the session rejected it at 1/60
    assert code == 10, out
    assert "REJECT" in out and "ACCEPT" not in out
    assert "at the level this decision had (α = 0.01667, Holm over 3 siblings)" in out
    code, out, _ = run(capsys, "gate", "helpful", "--project", str(project), "--alpha", "0.05", "--json")
    answer = json.loads(out)
    assert code == 14  # a what-if, never an accept
    assert answer["decision"] == "what-if" and answer["what_if"]["answer"] == "accept"
    assert answer["details"]["decided_level"]["this_answer_at_it"] is False
    assert "not the level this decision had (α = 0.01667, Holm over 3 siblings)" in answer["reason"]


@pytest.mark.attack(
    "laundering",
    attack=(
        "unconfined: `capevolve gate TAG` for a tag rejected at its Holm level (α = 1/60), its verdict "
        "file deleted beside the logged verdict, or its family level edited to 1/20: ACCEPT, exit 0, "
        "re-derived at the spec's α (or \"at the level this decision had (α = 0.05, Holm over 3 "
        "siblings)\"); a null's verdict edited moved the floor alike: each was read from its file unchecked"
    ),
    outcome=(
        "prevented: the recorded verdicts (the candidate's and its nulls') are read held to the sha256 "
        "their `verdict` events logged; one gone or edited makes the answer a what-if (exit 14) naming "
        "the file, the logged decision and the decision booked; restored, the decision is re-derived"
    ),
)
def test_capevolve_gate_never_reads_a_level_from_a_verdict_file_the_log_does_not_hold(
    built, example, projects, capevolve, capsys
):
    project, _ = _round_of_three(built, example, projects, capevolve)
    verdicts = projects.run_dir(project) / "verdicts"
    kept = {tag: (verdicts / f"{tag}.json").read_bytes() for tag in ("helpful", "seed-null1")}
    edited = json.loads(kept["helpful"])
    edited["details"]["family"]["level_exact"] = "1/20"
    null = json.loads(kept["seed-null1"])
    null["delta_mean"], null["delta_exact"] = -1.0, "-1"
    for tag, data, said in [
        ("helpful", None, "verdicts/helpful.json is gone, not the one the gate wrote (event seq"),
        ("helpful", json.dumps(edited), "verdicts/helpful.json is not the one the gate wrote (event seq"),
        ("seed-null1", json.dumps(null), "verdicts/seed-null1.json is not the one the gate wrote"),
    ]:
        path = verdicts / f"{tag}.json"
        path.unlink() if data is None else path.write_text(data)
        code, out, _ = run(capsys, "gate", "helpful", "--project", str(project))
        assert code == 14, (tag, out)  # before: 0, ACCEPT
        assert out.splitlines()[0].startswith("WHAT-IF, not the decision: " + said), out
        assert "the decision booked on 'helpful' is reject" in out and "ACCEPT" not in out
        path.write_bytes(kept[tag])
    code, out, _ = run(capsys, "gate", "helpful", "--project", str(project))
    assert code == 10 and "at the level this decision had (α = 0.01667, Holm over 3 siblings)" in out


@pytest.mark.attack(
    "laundering",
    attack=(
        "`capevolve gate TAG --against seed-null1 --gate-mode threshold` (or any override: `--k-se`, "
        "`--alpha`, `--veto-regressions`) to print ACCEPT, exit 0, for a rejected tag"
    ),
    outcome=(
        "prevented: an override departing from the decision's settings is a what-if, marked WHAT-IF in "
        "the table and the JSON, exit 14"
    ),
)
def test_every_override_of_capevolve_gate_is_a_what_if_never_an_accept(
    built, example, projects, capevolve, capsys
):
    project, _ = _round_of_three(built, example, projects, capevolve)
    where = ["--project", str(project)]
    # the red team's one step: another parent and a laxer rule print ACCEPT, exit 0, for a
    # tag whose booked decision is reject (today)
    code, out, _ = run(
        capsys, "gate", "helpful", *where, "--against", "seed-null1", "--gate-mode", "threshold"
    )
    assert code == 14, out
    assert out.splitlines()[0].startswith(
        "WHAT-IF, not the decision: --against seed-null1 (the decision: against 'seed'); "
        "--gate-mode threshold (the decision: exact) depart from the settings 'helpful' was decided "
        "under; the decision booked on 'helpful' is reject"
    )
    assert "ACCEPT" not in out and "helpful  WHAT-IF" in out and "not the decision — answer accept: " in out
    for flags, said in [
        (["--gate-mode", "threshold"], "--gate-mode threshold (the decision: exact)"),
        (["--against", "weak1"], "--against weak1 (the decision: against 'seed')"),
        (["--gate-mode", "paired", "--k-se", "0.1"], "--k-se 0.1 (the decision: "),
        (["--veto-regressions"], "--veto-regressions (the decision did not veto regressions)"),
    ]:
        code, out, _ = run(capsys, "gate", "helpful", *where, *flags, "--json")
        answer = json.loads(out)
        assert code == 14 and answer["decision"] == "what-if", (flags, out)
        assert any(d.startswith(said) for d in answer["what_if"]["departs"]), (flags, answer["what_if"])
        assert answer["what_if"]["booked"] == "reject"
    # an override that repeats the decision's own setting is no what-if: the decision, re-derived
    code, out, _ = run(capsys, "gate", "helpful", *where, "--against", "seed", "--gate-mode", "exact")
    assert code == 10 and "WHAT-IF" not in out and "REJECT" in out


# A scripted optimizer: iteration 1 fixes one val task (a reject, p = 1/2), iteration 2 writes
# those same bytes again, iteration 3 crashes (the loop restores the parent's unchanged copy).
REPEATER = """
import pathlib, sys
work, count = pathlib.Path(sys.argv[1]), pathlib.Path(__file__).with_name("calls")
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
handover = (work / "LEDGER.md").read_text() if (work / "LEDGER.md").exists() else ""
(pathlib.Path(__file__).with_name(f"ledger{n}.md")).write_text(handover)
if n == 3:
    sys.exit(3)
with (work / "prompt.md").open("a") as prompt:
    prompt.write("fix FIRST\\n")
"""


@pytest.mark.attack(
    "laundering",
    attack="an optimizer's output identical to an earlier candidate (a crash's unchanged copy)",
    outcome="prevented: booked as a repeat, never paid",
)
def test_hill_climb_books_repeats_without_a_rollout_and_says_what_they_repeat(
    fix_list_baseline, projects, capsys
):
    from cli_calls import hill_climb

    project = fix_list_baseline
    # the optimizer keeps its state beside itself, outside the project, in a folder it is granted
    state = project.parent / "repeater"
    state.mkdir()
    (state / "repeater.py").write_text(REPEATER.replace("FIRST", split_ids(project, "val")[0]))
    import sys

    optimizer = f"{sys.executable} {state / 'repeater.py'} {{workdir}} {{prompt}}"
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", optimizer, "--max-iterations", "3", "--writable", str(state)
    )
    assert code == 0, err
    rows = [(r["tag"], r["decision"], r["basis"]) for r in summary["iterations"]]
    assert rows == [
        ("cand_0001", "reject", "gate"),
        ("cand_0002", "reject", "repeat"),  # the same bytes as cand_0001: never paid again
        ("cand_0003", "reject", "repeat"),  # the crash's unchanged copy of the best
    ]
    rundir = projects.run_dir(project)
    paid = paid_tags(rundir)
    assert paid.count("cand_0001") == 12
    assert "cand_0002" not in paid and "cand_0003" not in paid
    two = json.loads((rundir / "verdicts" / "cand_0002.json").read_text())
    assert two["details"]["repeats"] == "cand_0001" and two["details"]["earlier_decision"] == "reject"
    three = json.loads((rundir / "verdicts" / "cand_0003.json").read_text())
    assert three["details"]["repeats"] == "seed" and "unchanged copy of the parent" in three["reason"]
    # the next proposal's handover names what the repeat repeated
    ledger = (state / "ledger3.md").read_text()
    assert "cand_0002" in ledger and "byte-identical to 'cand_0001'" in ledger
    assert json.loads((rundir / "state.json").read_text())["stall"] == 3


@pytest.mark.attack(
    "laundering",
    attack="a new run to re-decide the same bytes",
    outcome="refused, naming the earlier run",
)
def test_a_new_run_does_not_retake_a_decision_on_the_same_bytes(built, example, projects, capevolve):
    project, _ = _round_of_three(built, example, projects, capevolve)
    first = projects.run_dir(project).name
    again = capevolve(
        project, "helpful", gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "auto"]
    )
    # today: a fresh run gates 'helpful' alone at 0.05 and accepts what the Holm round rejected
    assert again.ret == 10, again.stdout.str()
    again.stdout.fnmatch_lines(
        [
            f"helpful *REJECT*byte-identical to 'helpful'*rejected (α = 0.01667, Holm over 3 siblings) in run {first}*"
        ]
    )
    second = projects.run_dir(project)
    assert second.name != first
    assert not list(second.glob("rollouts/val/*"))  # nothing paid: not even the best, nor a null
    # evaluating (not gating) in the new run is a measurement, not a decision: it is paid
    assert capevolve(project, "weak1").ret == 0
    assert rollout_files(second, "weak1")


@pytest.mark.attack(
    "laundering",
    attack="the deciding run's folder moved out of the project, then a new run gating the refuted bytes",
    outcome=(
        "refused, naming the earlier run: each booked decision is also remembered in "
        "`.capevolve/decisions.jsonl`"
    ),
)
def test_a_run_folder_moved_out_still_holds_its_decisions(built, example, projects, capevolve, tmp_path):
    """The red team's way round the cross-run check: move the deciding run's folder out of the
    project, then gate the refuted bytes in a new run. The project's memory of decisions
    (``.capevolve/decisions.jsonl``) still names the decision. (``.capevolve`` deleted whole is
    the project's memory deleted: what no file-level guard sees, the anchor's business.)"""
    project, _ = _round_of_three(built, example, projects, capevolve)
    first = projects.run_dir(project)
    first.rename(tmp_path / "elsewhere")
    again = capevolve(
        project, "helpful", gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "auto"]
    )
    # before: the log that knew the decision was gone, and 'helpful' was gated afresh at 0.05
    assert again.ret == 10, again.stdout.str()
    again.stdout.fnmatch_lines(
        [
            "helpful *REJECT*byte-identical to 'helpful'*rejected (α = 0.01667, Holm over 3 siblings)"
            f" in run {first.name}*"
        ]
    )
    second = projects.run_dir(project)
    assert second.name != first.name
    assert not rollout_files(second, "helpful")  # never paid


@pytest.mark.attack(
    "laundering",
    attack="bytes accepted in an earlier run gated again (it read `REJECT … by repeat`, exit 10)",
    outcome='prevented: `REPEAT`, "repeat of TAG (accepted at …)", nothing booked or paid, exit 15',
)
def test_a_repeat_of_accepted_bytes_in_a_new_run_is_said_as_a_repeat_not_a_reject(
    fix_list_big_accepted, projects, capevolve
):
    project = fix_list_big_accepted  # 'big' fixes val[:5]: p = 1/32 alone, accepted at α = 0.05
    first = projects.run_dir(project).name
    again = capevolve(project, "big", gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "auto"])
    # today: "REJECT … by repeat", exit 10, for bytes the project accepted
    assert again.ret == 15, again.stdout.str()
    out = again.stdout.str()
    again.stdout.fnmatch_lines(
        [
            f"big *REPEAT*never paid for: repeat of 'big' (accepted at α = 0.05, as recorded) in run {first}*",
            "big: nothing booked — repeat of 'big' (accepted at α = 0.05, as recorded); "
            "`capevolve commit big * --decision accept` adopts that accept as this run's best*",
        ]
    )
    assert not [line for line in out.splitlines() if line.startswith("big") and "REJECT" in line]
    assert "booked reject" not in out
    second = projects.run_dir(project)
    assert second.name != first and not list(second.glob("rollouts/val/*"))  # nothing paid
    booked = [json.loads(line) for line in (second / "events.jsonl").read_text().splitlines()]
    assert not [e for e in booked if e.get("kind") == "decision"]  # nothing booked
    assert _verdict(project, projects, "big")["decision"] == "repeat"


def test_an_accept_from_an_earlier_run_is_adopted_labelled_and_the_new_run_goes_on_from_it(
    fix_list_big_accepted, projects, capevolve, capsys
):
    """The way on from a REPEAT of accepted bytes in a new run (it was a dead end: the gate
    refuses to measure a repeat, and commit refused the accept with a message that contradicted
    itself): the accept is adopted, labelled, nothing paid or spent, and the run's next gate
    goes against the adopted best."""
    project = fix_list_big_accepted  # 'big' fixes val[:5]: p = 1/32 alone, accepted at α = 0.05
    val = split_ids(project, "val")
    first = projects.run_dir(project).name
    assert capevolve(project, "big", gate=True, extra=["--capevolve-new-run"]).ret == 15

    code, out, err = run(capsys, "commit", "big", str(project), "--decision", "accept")

    assert code == 0, err
    booked = json.loads(out)
    assert booked["best"] == "big" and booked["rollouts"] == 0
    assert booked["label"].startswith(f"adopted: accepted against the same bytes as 'seed' in run {first}")
    code, out, _ = run(capsys, "runs", str(project))
    assert "big (adopted)" in out  # the full label stays in measure, report.md and --json
    assert max(len(line) for line in out.splitlines()) <= 100, out  # issue 38, trap 2: it was ~140
    fixing(project, "bigger", val[:7])
    after = capevolve(project, "bigger", gate=True)
    assert after.ret in (0, 10), after.stdout.str()
    assert _verdict(project, projects, "bigger")["against"] == "big"


def test_an_accept_against_other_parent_bytes_is_not_adopted(fix_list_big_accepted, capevolve, capsys):
    """Only "these bytes beat those" carries over: in a run whose seed has changed, the earlier
    accept was against other bytes, and commit says so with the way on."""
    project = fix_list_big_accepted  # 'big' fixes val[:5]: p = 1/32 alone, accepted at α = 0.05
    seed_file = next(p for p in (project / "capability").rglob("*") if p.is_file())
    seed_file.write_text(seed_file.read_text() + "\n")  # a new run of another seed
    assert capevolve(project, "big", gate=True, extra=["--capevolve-new-run"]).ret == 15

    code, _, err = run(capsys, "commit", "big", str(project), "--decision", "accept")

    assert code != 0 and "against 'seed' there, whose bytes differ from this run's best 'seed'" in err, err


@pytest.mark.attack(
    "laundering",
    attack=(
        "`--capevolve-harness-changed` after a real harness change: the session labels the re-gate, "
        "then report.md, the dashboard, LEDGER.md, `measure`, `runs` and the finalize summary show the "
        "best with a test score and no label"
    ),
    outcome=(
        "prevented: the label is kept in the accept's decision event and every view of the best shows "
        "it, as a forced accept's"
    ),
)
@pytest.mark.attack(
    "laundering",
    attack=(
        "a comment added to `adapter.py` (a new harness digest), then a new run gating the refuted "
        "bytes alone"
    ),
    outcome=(
        "refused: the cross-run check keys on the bytes and the val tasks; the harness change is "
        "reported, and only `--capevolve-harness-changed` re-gates, labelled in the verdict and summary"
    ),
)
def test_a_comment_added_to_the_adapter_does_not_make_refuted_bytes_new(
    built, example, projects, capevolve, capsys
):
    project, _ = _round_of_three(built, example, projects, capevolve)
    first = projects.run_dir(project).name
    adapter = project / "adapter.py"
    original = adapter.read_text()
    adapter.write_text(original + "# x\n")  # the red team's step: a new harness digest, nothing else
    again = capevolve(
        project, "helpful", gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "auto"]
    )
    # today: a new run at α = 0.05, alone, accepts what the Holm round rejected
    assert again.ret == 10, again.stdout.str()
    again.stdout.fnmatch_lines(
        [
            "helpful *REJECT*byte-identical to 'helpful'*rejected (α = 0.01667, Holm over 3 siblings) "
            f"in run {first}*the harness differs from run {first}'s: adapter.py (changed)*"
            "--capevolve-harness-changed gates these bytes again, labelled*"
        ]
    )
    assert not list(projects.run_dir(project).glob("rollouts/val/*"))

    # the harness the first run decided under: the escape does not apply, still a repeat
    adapter.write_text(original)
    same = capevolve(
        project, "helpful", gate=True, extra=["--capevolve-new-run", "--capevolve-harness-changed"]
    )
    assert same.ret == 10, same.stdout.str()
    same.stdout.fnmatch_lines(["helpful *REJECT*--capevolve-harness-changed does not apply*"])

    # after a real fix the user says so: gated again, and every view of it says it was
    adapter.write_text(original + "# a fix that matters\n")
    fixed = capevolve(
        project,
        "helpful",
        gate=True,
        extra=["--capevolve-new-run", "--capevolve-harness-changed", "--capevolve-commit", "auto"],
    )
    assert fixed.ret == 0, fixed.stdout.str()
    label = "re-gated after a harness change — not the decision another run took on these bytes"
    fixed.stdout.fnmatch_lines([f"*{label}: run {first} booked reject on these bytes as 'helpful'*"])
    verdict = _verdict(project, projects, "helpful")
    assert verdict["decision"] == "accept" and verdict["details"]["harness_changed"]["label"] == label
    assert verdict["details"]["harness_changed"]["earlier_run"] == first
    # the label follows the decision into every view, after finalize too (a red team saw it
    # vanish from report.md, the dashboard, LEDGER.md, measure and runs)
    finalized = capevolve(project, finalize=True)
    assert finalized.ret == 0, finalized.stdout.str()
    finalized.stdout.fnmatch_lines([f"*test split scored once and sealed: best 'helpful' ({label})*"])
    rundir = projects.run_dir(project)
    assert "accept (re-gated after a harness change)" in (rundir / "LEDGER.md").read_text()
    assert f"Best: `helpful` ({label})" in (rundir / "report.md").read_text()
    assert label in (rundir / "dashboard.html").read_text()
    code, measured, _ = run(capsys, "measure", str(project), "--finalize")
    assert code == 0 and "best 'helpful' (re-gated after a harness change)" in measured
    code, runs, _ = run(capsys, "runs", str(project))
    assert code == 0 and "helpful (re-gated after a harness change)" in runs


COPIER = """
import shutil, sys
from pathlib import Path
shutil.copyfile(Path("candidates/careful/prompt.md"), Path(sys.argv[1]) / "prompt.md")
"""


STEPPER = """
import sys
from pathlib import Path
RULES = {1: "Multiply carefully.", 2: "Mind the sign.", 3: "Be brief."}
work = Path(sys.argv[1])  # cand_000N gets rule N onto its parent: the same proposal in every run
rule = RULES.get(int(work.name.rsplit("_", 1)[1]))
if rule:
    (work / "prompt.md").write_text((work / "prompt.md").read_text() + rule + "\\n")
"""


def test_hill_climb_in_a_new_run_adopts_the_last_runs_accept_then_gates_against_it(example, projects, capsys):
    """Issue 38: a deterministic optimizer in a ``--new-run`` proposes first what the last run
    accepted against the same seed; that accept is adopted (labelled, unpaid), the adopted best's
    val rollouts are paid once, and the next two iterations are gated against it (the reverted
    adoption refused the next iteration: "tag 'cand_0001' has no val rollouts in run …")."""
    import sys

    from cli_calls import hill_climb

    project = example("toy_calc")
    (project / "stepper.py").write_text(STEPPER)
    optimizer = ["--optimizer", f"{sys.executable} stepper.py {{workdir}}", "--store", "copy"]
    code, summary, err = hill_climb(capsys, project, *optimizer, "--max-iterations", "1")
    assert code == 0 and summary["accepted"] == ["cand_0001"], err
    first = summary["run_id"]
    # in process, no workers: the loop under xdist is test_hill_climb.py's toy_calc climb
    code, summary, err = hill_climb(capsys, project, *optimizer, "--new-run", "--max-iterations", "3")
    assert code == 0, err
    decided = [(r["tag"], r["decision"], r["basis"]) for r in summary["iterations"]]
    assert decided == [
        ("cand_0001", "accept", None),
        ("cand_0002", "reject", "gate"),
        ("cand_0003", "reject", "gate"),
    ]
    assert summary["best"] == "cand_0001" and summary["run_id"] != first
    assert "cand_0001: no gate, no rollout: byte-identical to 'cand_0001' of another run" in err
    assert err.count("the best 'cand_0001' has no val rollouts in this run (booked unpaid") == 1, err
    assert "no baseline yet" not in err.split("adopted as this run's best")[1], err
    rundir = projects.run_dir(project)
    events = [json.loads(line) for line in (rundir / "events.jsonl").read_text().splitlines()]
    adopted = next(e for e in events if e["kind"] == "decision")
    assert adopted["label"].startswith(f"adopted: accepted against the same bytes as 'seed' in run {first}")
    rollouts = [e for e in events if e["kind"] == "rollout" and e.get("tag") == "cand_0001"]
    assert rollouts and all(e["seq"] > adopted["seq"] for e in rollouts)  # paid after the adoption
    assert len(rollouts) == len(json.loads((rundir / "splits.json").read_text())["val"])  # once
    for tag in ("cand_0002", "cand_0003"):  # real verdicts against the adopted best
        verdict = json.loads((rundir / "verdicts" / f"{tag}.json").read_text())
        assert verdict["against"] == "cand_0001" and verdict["n_tasks"] == 12, verdict


@pytest.mark.attack(
    "laundering",
    attack=(
        "a candidate accepted by a one-shot gate at `-o capevolve_gate_alpha=0.25` (constant); in a new run "
        "at the owner's α of 0.05 (`capevolve hill-climb --new-run`, addis), the optimizer proposes its bytes "
        "again, hoping the loop adopts them as it adopts a constant run's accept decided at α ≤ 0.05"
    ),
    outcome=(
        "not adopted: an accept under another schedule is adopted only at a level ≤ this run's α; the "
        "iteration is booked `indecisive (repeat)`, its line naming the settings and the way on"
    ),
)
def test_hill_climb_books_a_repeat_of_accepted_bytes_and_says_so(example, projects, capevolve, capsys):
    """Issue 38, trap 7c: an optimizer's output byte-identical to bytes accepted earlier (here in
    another run) is never paid for, and is booked (the loop counts the iteration and its
    proposer's spend); the ledger's note and the log line say so, where they repeated the gate's
    "nothing new decided or booked" beside the booking. Accepted at α = 0.25, they are not adopted
    by a run at α = 0.05 (the schedule alone would not stop them)."""
    import sys

    from cli_calls import hill_climb

    project = example("toy_calc")
    loose = ["--capevolve-commit", "auto", "-o", "capevolve_gate_alpha=0.25"]
    gated = capevolve(project, "careful", gate=True, extra=loose)
    assert gated.ret == 0, gated.stdout.str()  # careful accepted in the first run, at α = 0.25
    (project / "copier.py").write_text(COPIER)
    optimizer = f"{sys.executable} copier.py {{workdir}}"
    code, summary, err = hill_climb(
        capsys, project, "--new-run", "--optimizer", optimizer, "--max-iterations", "1"
    )
    assert code == 0, err
    assert [(r["tag"], r["decision"], r["basis"]) for r in summary["iterations"]] == [
        ("cand_0001", "indecisive", "repeat")
    ]
    rundir = projects.run_dir(project)
    assert not rollout_files(rundir, "cand_0001")
    ledger = (rundir / "LEDGER.md").read_text()
    row = next(line for line in ledger.splitlines() if line.startswith("| cand_0001 |"))
    assert "| indecisive | repeat |" in row and "byte-identical to 'careful' (accepted at" in row
    assert "booked indecisive (repeat)" in row and "nothing new decided or booked" not in row
    line = next(line for line in err.splitlines() if line.startswith("iter 1:"))
    assert "booked indecisive (repeat)" in line and "nothing new decided or booked" not in line
    # not adopted: it says why (decided at α = 0.25 there, constant; this run's α is 0.05) and the
    # way on (a new run at α 0.25 adopts it, at any schedule)
    assert "not adopted: 'careful' was accepted in run " in line
    assert "under gate_alpha 0.25 (this run: 0.05), gate_alpha_schedule constant (this run: addis)" in line
    assert line.count("gate_alpha_schedule") == 1  # the way on names no schedule
    assert "or adopt it in a new run whose spec names gate_alpha: 0.25." in line
    assert "cand_0001: no gate, no rollout: byte-identical to 'careful'" in err


def test_hill_climb_books_an_in_run_repeat_of_accepted_bytes_and_its_verdict_says_so(
    example, projects, capevolve, capsys
):
    """The same in one run: bytes accepted earlier ('sign', then 'careful' became the best),
    proposed again by the optimizer, are refused unpaid by the loop's own repeat screen; its
    verdict says the proposal is booked, where it said "nothing new decided or booked"."""
    import sys

    from cli_calls import hill_climb

    from pytest_capevolve._cli.main import main

    project = example("toy_calc")
    (project / "candidates" / "sign").mkdir()
    (project / "candidates" / "sign" / "prompt.md").write_text(
        "# Calculator agent\n\nAnswer the arithmetic question with a single integer.\nMind the sign.\n"
    )
    for tag in ("sign", "careful"):  # accepted by hand (against the gate), one after the other
        lord = ["--capevolve-commit", "none", "-o", "capevolve_gate_alpha_schedule=lord"]
        assert capevolve(project, tag, gate=True, extra=lord).ret in (0, 10)
        args = ["commit", tag, "--project", str(project), "--decision", "accept", "--force"]
        assert main(args) == 0, capsys.readouterr()
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["best_id"] == "careful"
    (project / "copier.py").write_text(COPIER.replace("careful", "sign"))
    optimizer = f"{sys.executable} copier.py {{workdir}}"
    code, summary, err = hill_climb(capsys, project, "--optimizer", optimizer, "--max-iterations", "1")
    assert code == 0, err
    assert [(r["tag"], r["decision"], r["basis"]) for r in summary["iterations"]] == [
        ("cand_0001", "reject", "repeat")
    ]
    reason = json.loads((projects.run_dir(project) / "verdicts" / "cand_0001.json").read_text())["reason"]
    assert "byte-identical to 'sign'" in reason and "is booked reject (repeat)" in reason
    assert "nothing new decided or booked" not in reason
