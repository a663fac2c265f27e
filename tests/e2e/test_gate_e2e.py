"""The gate session end to end on examples/noisy_agent, with and without xdist."""

from __future__ import annotations

import json
import shutil

import pytest

from pytest_capevolve._cli.main import main

VERDICT_FIELDS = {
    "mode",
    "alpha",
    "n_tasks",
    "trials",
    "delta_mean",
    "se",
    "ci",
    "p_value",
    "bar",
    "coverage",
    "footprint",
    "regressions",
    "null_spread",
    "reason",
    "decision",
    "per_task",
}


@pytest.mark.parametrize(
    "candidate, code, decision",
    [("improved", 0, "accept"), ("copy", 10, "reject"), ("regressed", 10, "reject")],
)
def test_gate_verdicts_on_noisy_agent(request, example, projects, capevolve, candidate, code, decision):
    """In process: the same verdicts under xdist are test_verdicts_identical_with_and_without_xdist.
    Two trials a task (not five): each verdict stands at n = 2, and 800 rollouts become 320. The
    gates of 'improved' and 'copy' are the shared builds (the example's microcases pass both
    before any rollout); the statistical rule is under test here, and the example's no-upsell
    microcase would reject 'regressed' before its rollouts (see test_microcases.py), so its copy
    goes without them."""
    if candidate in ("improved", "copy"):
        project, result = request.getfixturevalue(f"{candidate}_gated")
    else:
        project = example("noisy_agent")
        shutil.rmtree(project / "microcases")
        projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
        result = capevolve(project, candidate, gate=True)
    assert result.ret == code, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*capevolve verdicts vs seed (val)*", f"{candidate} *{decision.upper()}*40*"]
    )
    rundir = projects.run_dir(project)
    verdict = json.loads((rundir / "verdicts" / f"{candidate}.json").read_text())
    assert VERDICT_FIELDS <= set(verdict)
    assert verdict["decision"] == decision and verdict["n_tasks"] == 40 and verdict["trials"] == 2
    assert verdict["null_spread"] is not None and verdict["nulls"] == ["seed-null1", "seed-null2"]
    for null in ("seed-null1", "seed-null2"):
        assert json.loads((rundir / "verdicts" / f"{null}.json").read_text())["decision"] == "reject"
    state = json.loads((rundir / "state.json").read_text())
    assert state["best_id"] == (candidate if decision == "accept" else "seed")


def test_verdicts_identical_with_and_without_xdist(example, projects, capevolve):
    verdicts = {}
    for mode, extra in (("plain", []), ("xdist", ["-n", "2"])):
        # two copies of one project in two folders: two projects, each deciding afresh
        project = example("noisy_agent", dest=f"noisy_{mode}")
        # two trials a task (not five): sameness does not depend on n, and 1,600 rollouts become 640
        projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
        capevolve(project, "mixed", gate=True, extra=extra)
        verdicts[mode] = json.loads((projects.run_dir(project) / "verdicts" / "mixed.json").read_text())
    assert verdicts["plain"]["trials"] == 2 and verdicts["plain"] == verdicts["xdist"]


def test_capevolve_gate_rederives_the_verdict_without_paying(improved_gated, projects, capsys):
    project, _ = improved_gated  # at two trials: re-derived alike at any n
    rundir = projects.run_dir(project)
    recorded = json.loads((rundir / "verdicts" / "improved.json").read_text())
    spent = json.loads((rundir / "state.json").read_text())["spent"]
    capsys.readouterr()  # drop what the in-process session printed
    assert main(["gate", "improved", "--project", str(project), "--json"]) == 0
    out = capsys.readouterr()
    derived = json.loads(out.out)  # stdout is the JSON and nothing else; the table went to stderr
    assert "improved  ACCEPT" in out.err
    for key in ("decision", "p_value", "delta_mean", "se", "ci", "null_spread", "per_task"):
        assert derived[key] == recorded[key]
    assert json.loads((rundir / "state.json").read_text())["spent"] == spent
    # re-gate with the legacy rule and against another tag: what-ifs (14), not the decisions
    assert (
        main(["gate", "improved", "--project", str(project), "--gate-mode", "paired", "--k-se", "1.0"]) == 14
    )
    assert main(["gate", "seed-null1", "--project", str(project), "--against", "improved"]) == 14
    assert main(["gate", "nope", "--project", str(project)]) == 4


@pytest.fixture
def copy_gated(built, example, projects, capevolve):
    """examples/noisy_agent cut to two trials, after the gate of 'copy' (rejected: the best stays
    the seed, its two null controls paid), and that session's result: built once per process
    (tests/conftest.py ``built``), a copy for each test."""

    def make():
        project = example("noisy_agent")
        projects.edit_spec(project, "num_trials: 5", "num_trials: 2")  # 40 tasks × 2 trials a tag
        return project, capevolve(project, "copy", gate=True)

    return built("noisy-agent-two-trials-copy-gated", "noisy_agent", make)


def test_nulls_are_reused_while_the_best_is_unchanged(copy_gated, capevolve):
    second = capevolve(copy_gated[0], "mixed", gate=True)
    second.stdout.fnmatch_lines(["rollouts: 80 paid, 240 reused*"])


def test_the_same_gate_run_again_after_its_accept_pays_nothing(improved_gated, capevolve):
    project, first = improved_gated  # 40 tasks × 2 trials a tag
    first.stdout.fnmatch_lines(["improved: booked accept"])
    again = capevolve(project, "improved", gate=True)  # the candidate is the best now
    said = "nothing to gate: no candidate but the best (improved) is in this session (none was named, or*"
    again.stdout.fnmatch_lines(["rollouts: 0 paid, 80 reused*", said])
    # a gate naming no candidate was told "the candidate asked for is the best": it names the option
    bare = capevolve(project, gate=True)
    bare.stdout.fnmatch_lines([f"{said}name its folder with --capevolve-candidate FOLDER*"])
    assert not list((project / ".capevolve").glob("runs/*/rollouts/val/*improved-null*"))


def test_gate_refuses_train(example, capevolve):
    project = example("noisy_agent")
    result = capevolve(project, "improved", gate=True, extra=["--capevolve-split", "train"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the gate reads only val*"])


def test_capevolve_plan_reports_mde_and_headroom(example, copy_gated, capsys):
    fresh = example("noisy_agent", dest="fresh")
    assert main(["plan", str(fresh)]) == 4  # nothing persisted yet
    assert not (fresh / ".capevolve").exists()  # a read-only command creates no run
    capsys.readouterr()
    project, _ = copy_gated  # the plan reads whatever n was paid: two trials here
    assert main(["plan", str(project), "--target", "0.9"]) == 0
    out = capsys.readouterr().out
    assert "from 2 null control(s)" in out
    mde = float(out.split("power 0.8: Δ̄ ≈ ")[1].split()[0])
    assert 0.01 < mde < 0.5
    assert "headroom: Σ(1 − rate) = " in out and "target mean 0.9: needs" in out
