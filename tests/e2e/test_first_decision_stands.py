"""Every decision keeps its level (issue 25, red team round 2): gating a tag again under the
same name is not a second decision. A verdict, once written for a registered tag, stands; a
gate session on it re-derives that decision at its recorded level, pays nothing, writes
nothing and exits with that decision's code, and ``commit`` books only what it holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_calls import run
from fix_list_project import fixing, split_ids
from run_log import rollout_files


def _siblings_unbooked(project: Path, capevolve, extra: tuple[str, ...] = ()) -> Path:
    """The fix-list project (after its first session) after a 3-sibling round gated with
    ``--capevolve-commit none`` (and ``extra``): ``helpful`` (p = 1/32) rejected at Holm's 1/60 by
    default, nothing booked."""
    val = split_ids(project, "val")
    fixing(project, "helpful", val[:5])
    fixing(project, "weak1", val[5:6])
    fixing(project, "weak2", val[6:7])
    gated = capevolve(
        project, "helpful", "weak1", "weak2", gate=True, extra=[*extra, "--capevolve-commit", "none"]
    )
    assert gated.ret == 10, gated.stdout.str()
    return project


@pytest.mark.attack(
    "laundering",
    attack=(
        "one sibling of a Holm round gated again alone under its own tag (`--capevolve-commit none`), "
        "so the session re-judges it at the full α, rewrites `verdicts/TAG.json` as an accept and "
        "`capevolve commit TAG --decision accept` books it"
    ),
    outcome=(
        "prevented: a registered tag's verdict that decided is never replaced (the store refuses it; "
        "only a grow adds a look to a provisional one); the session re-derives the recorded decision "
        'at its recorded level ("already decided … Holm over 3 siblings"), pays nothing, writes '
        "nothing, exits with that decision's code; commit books only what the first verdict holds"
    ),
)
def test_regating_one_sibling_under_its_own_tag_keeps_its_holm_reject(
    fix_list_baseline, projects, capevolve, capsys
):
    project = _siblings_unbooked(fix_list_baseline, capevolve)
    rundir = projects.run_dir(project)
    verdict = rundir / "verdicts" / "helpful.json"
    first = verdict.read_bytes()
    assert json.loads(first)["details"]["family"]["level_exact"] == "1/60"
    paid = sorted(p.name for p in (rundir / "rollouts" / "val").iterdir())

    alone = capevolve(project, "helpful", gate=True, extra=["--capevolve-commit", "none"])
    # today: ACCEPT p=0.03125 ≤ α=0.05, exit 0, and verdicts/helpful.json replaced by that accept
    assert alone.ret == 10, alone.stdout.str()
    alone.stdout.fnmatch_lines(
        [
            "helpful *REJECT*already decided*at the level this decision had (α = 0.01667, Holm over 3 siblings)*"
        ]
    )
    assert "ACCEPT" not in alone.stdout.str()
    assert verdict.read_bytes() == first  # the first verdict stands, byte for byte
    assert sorted(p.name for p in (rundir / "rollouts" / "val").iterdir()) == paid  # nothing paid

    # commit books only the decision the first verdict holds
    code, out, err = run(capsys, "commit", "helpful", "--project", str(project), "--decision", "accept")
    assert code == 2, out + err
    assert json.loads((rundir / "state.json").read_text())["best_id"] == "seed"

    # with --capevolve-commit auto: the recorded reject is what is said (and booked), not ACCEPT
    auto = capevolve(project, "helpful", gate=True, extra=["--capevolve-commit", "auto"])
    assert auto.ret == 10, auto.stdout.str()
    assert "ACCEPT" not in auto.stdout.str()
    assert verdict.read_bytes() == first
    code, out, _ = run(capsys, "gate", "helpful", "--project", str(project))
    assert code == 10 and "α = 0.01667, Holm over 3 siblings" in out, out


@pytest.mark.attack(
    "laundering",
    attack=(
        "`--capevolve-multiple none` (or `bh`) picked for a later session after a Holm round, to gate "
        'at α each; a BH top-rank reason that says only "p ≤ α = 0.05"'
    ),
    outcome=(
        "refused in one line: the family correction is frozen with the run's gate settings at its "
        "first decision; every sibling's reason names the method and its level"
    ),
)
def test_the_family_correction_is_frozen_with_the_run_and_every_reason_names_it(
    fix_list_baseline, projects, capevolve
):
    project = _siblings_unbooked(fix_list_baseline, capevolve, ("--capevolve-multiple", "bh"))
    rundir = projects.run_dir(project)
    for tag in ("helpful", "weak1", "weak2"):
        verdict = json.loads((rundir / "verdicts" / f"{tag}.json").read_text())
        # today: weak1 and weak2, at BH's top rank (level α), say only "p > α = 0.05"
        reason = verdict["reason"]
        assert "by Benjamini-Hochberg" in reason and "3 siblings" in reason, reason

    # a later session asking another correction is refused in one line, before it pays
    fixing(project, "other", split_ids(project, "val")[7:9])
    laxer = capevolve(project, "other", gate=True, extra=["--capevolve-multiple", "none"])
    # today: gated at α each, nothing said
    assert laxer.ret == 4, laxer.stdout.str()
    assert "--capevolve-multiple none (frozen bh)" in laxer.stdout.str() + laxer.stderr.str()
    assert not rollout_files(rundir, "other")


@pytest.mark.attack(
    "laundering",
    attack=(
        "agent mode gating its work copies with no schedule named (PROCESS.md's command names none: "
        "the broker refuses `-o`), so the run freezes `constant` α for dozens of decisions"
    ),
    outcome=(
        "prevented: a loop run (work copies, or hill-climb) takes `addis` (a run frozen under `lord` "
        "keeps it) at its first decision unless the spec or the command line names a schedule; each "
        "verdict says which and why"
    ),
)
def test_a_work_copy_gated_without_the_flag_spends_alpha_the_loop_way(
    fix_list_baseline, projects, capevolve, capsys
):
    project = fix_list_baseline
    val = split_ids(project, "val")
    code, answer, _ = run(capsys, "work", "new", "w1", "--project", str(project), "--json")
    assert code == 0
    copy = Path(json.loads(answer)["path"])
    with (copy / "prompt.md").open("a") as prompt:
        prompt.write("".join(f"fix {t}\n" for t in val[:2]))
    # the agent leaves out PROCESS.md's -o capevolve_gate_alpha_schedule=addis
    gated = capevolve(project, copy, gate=True, extra=["--capevolve-commit", "none"])
    assert gated.ret == 10, gated.stdout.str()
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "w1.json").read_text())
    # today: constant, frozen for the whole run
    assert verdict["details"]["gate_settings"]["gate_alpha_schedule"] == "addis"
    assert verdict["alpha_budget"]["schedule"] == "addis"
    assert "a loop run's default" in verdict["details"]["alpha_schedule_why"]
    gated.stdout.fnmatch_lines(["*gate_alpha_schedule addis: a loop run's default*"])
