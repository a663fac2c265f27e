"""The sealed test split: one finalize per run, crash-safe, race-free, and unreadable before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_capevolve._decide.gate import decide
from pytest_capevolve._decide.verdict import GateConfig, GateSplitError
from pytest_capevolve._store.memory.seal import Seal, TestSealError
from pytest_capevolve._store.rundir import RunDir

NO_CACHE = ["-p", "no:cacheprovider"]


@pytest.fixture
def gated_project(improved_gated, projects) -> Path:
    """noisy_agent with 2 trials, after a gate that made 'improved' the best (a copy of one build
    per process)."""
    project, result = improved_gated
    assert result.ret == 0, result.stdout.str()
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["best_id"] == "improved"
    return project


def _gated(example, projects, capevolve) -> Path:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    # no null controls: a finalize scores the best and the seed only
    result = capevolve(project, "improved", gate=True, extra=["--capevolve-null", "0"])
    assert result.ret == 0, result.stdout.str()
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["best_id"] == "improved"
    return project


@pytest.fixture
def held_out_files(projects) -> Callable[[Path], list[str]]:
    """``held_out_files(project)``: the names of the newest run's persisted test rollouts."""

    def names(project: Path) -> list[str]:
        return sorted(p.name for p in (projects.run_dir(project) / "rollouts" / "test").glob("*.json"))

    return names


@pytest.fixture
def events(projects) -> Callable[[Path, str], list[dict]]:
    """``events(project, kind)``: the newest run's events of one kind, in order."""

    def of_kind(project: Path, kind: str) -> list[dict]:
        lines = (projects.run_dir(project) / "events.jsonl").read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["kind"] == kind]

    return of_kind


def test_finalize_scores_best_and_seed_once_then_refuses(
    gated_project, projects, capevolve, held_out_files, events
):
    """The finalize's -n 2 case (in process: the other tests of this file)."""
    xdist_args = ["-n", "2"]
    project = gated_project
    first = capevolve(project, finalize=True, extra=xdist_args)
    assert first.ret == 0, first.stdout.str()
    seal = json.loads((projects.run_dir(project) / "seal.json").read_text())
    test_ids = json.loads((projects.run_dir(project) / "splits.json").read_text())["test"]
    assert seal["best"]["tag"] == "improved" and seal["seed"]["tag"] == "seed"
    assert seal["tasks"] == len(test_ids) == 24 and seal["trials"] == 2
    assert seal["delta_vs_seed"]["n"] == 24
    assert abs(seal["delta_vs_seed"]["mean"] - (seal["best"]["mean"] - seal["seed"]["mean"])) < 1e-12
    assert len(held_out_files(project)) == 24 * 2 * 2
    first.stdout.fnmatch_lines(["*test split scored once and sealed: best 'improved' mean*"])

    paid_before = len(events(project, "rollout"))
    files_before = held_out_files(project)
    second = capevolve(project, finalize=True, extra=xdist_args)
    assert second.ret == pytest.ExitCode.USAGE_ERROR
    second.stderr.fnmatch_lines(
        ["*TestSealError*already scored*exactly once per run*--capevolve-new-run*finalize that run*"]
    )
    assert len(events(project, "rollout")) == paid_before
    assert held_out_files(project) == files_before
    assert json.loads((projects.run_dir(project) / "seal.json").read_text()) == seal


KILL_BEFORE_BURN = """
import json, os, signal
from pathlib import Path

def pytest_capevolve_test_scored(result, run_dir):
    marker = Path(__file__).with_name("kill-before-burn")
    if marker.exists():
        marker.write_text(json.dumps(result["best"]["mean"]))
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_finalize_killed_between_scoring_and_writing_leaves_the_seal_unburned(
    pytester, example, projects, capevolve, held_out_files, events
):
    """Without workers: the hook and the burn after it run in the controller alone, with or
    without them; finalize's one case under -n 2 is test_finalize_scores_best_and_seed_once_then_refuses's."""
    # the hook is in place from the run's first session: a conftest is harness, locked with the run
    pytester.makeconftest(KILL_BEFORE_BURN)
    project = _gated(example, projects, capevolve)
    marker = pytester.path / "kill-before-burn"
    marker.write_text("")
    killed = capevolve(project, finalize=True, subprocess=True)
    assert killed.ret == -9, killed.stdout.str()
    rundir = projects.run_dir(project)
    assert not (rundir / "seal.json").exists()
    assert not list(rundir.glob("**/*.tmp"))  # nothing half-written
    assert len(held_out_files(project)) == 24 * 2 * 2  # every scored rollout was kept
    mean_seen = json.loads(marker.read_text())
    marker.unlink()

    again = capevolve(project, finalize=True)  # kills nothing: in process
    assert again.ret == 0, again.stdout.str()
    again.stdout.fnmatch_lines(["*rollouts: 0 paid, 96 reused*"])
    seal = json.loads((rundir / "seal.json").read_text())
    assert seal["best"]["mean"] == mean_seen  # the crash could not redraw the test score
    assert len(events(project, "test_scored")) == 1


@pytest.mark.attack(
    "held-before",
    attack="8 racing finalizes",
    outcome="exactly one scores",
)
def test_eight_concurrent_finalizes_score_exactly_once(pytester, gated_project, events):
    project = gated_project
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "--capevolve-finalize", str(project), "-q", *NO_CACHE]
    procs = [
        subprocess.Popen(
            command, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for _ in range(8)
    ]
    outputs = [(p.wait(timeout=300), p.stdout.read().decode()) for p in procs]
    for p in procs:
        p.stdout.close()
    winners = [out for code, out in outputs if code == 0]
    refused = [out for code, out in outputs if code == pytest.ExitCode.USAGE_ERROR]
    assert len(winners) == 1, outputs
    assert len(refused) == 7, outputs
    assert all("TestSealError" in out for out in refused)
    assert len(events(project, "test_scored")) == 1
    assert len([e for e in events(project, "rollout") if e["split"] == "test"]) == 24 * 2 * 2


def test_test_split_is_refused_by_every_evaluation_path(pytester, example, projects, capevolve):
    project = example("toy_calc")
    by_flag = capevolve(project, extra=["--capevolve-split", "test"])
    assert by_flag.ret == pytest.ExitCode.USAGE_ERROR
    by_flag.stderr.fnmatch_lines(["*test split is sealed*--capevolve-finalize*"])

    pytester.makeini("[pytest]\ncapevolve_split = test\n")
    by_ini = capevolve(project)
    assert by_ini.ret == pytest.ExitCode.USAGE_ERROR
    by_ini.stderr.fnmatch_lines(["*test split is sealed*"])
    (pytester.path / "tox.ini").unlink()

    assert capevolve(project).ret == 0
    both = capevolve(project, extra=["--capevolve-finalize", str(project)])
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    with_gate = capevolve(project, finalize=True, gate=True)
    # the session it names is this project's (it said `--capevolve-run . ...`, wherever the project was)
    with_gate.stderr.fnmatch_lines(
        [
            "*--capevolve-gate does not apply to --capevolve-finalize*drop the flag*"
            f"(pytest --capevolve-run {project} --capevolve-gate …) and finalize after*"
        ]
    )

    rundir = RunDir(projects.run_dir(project))
    with pytest.raises(TestSealError, match="only through the seal"):
        rundir.rollouts.rollouts("test")
    with pytest.raises(TestSealError, match="sealed until finalize"):
        Seal(rundir).test_rollouts()
    with pytest.raises(GateSplitError):
        decide([[1.0]], [[0.0]], tag="a", against="b", task_ids=["t"], config=GateConfig(), split="test")


def test_after_finalize_no_new_best_can_be_chosen_in_the_run(toy_calc_baseline, projects, capevolve):
    project = toy_calc_baseline
    assert capevolve(project, finalize=True).ret == 0
    seal = json.loads((projects.run_dir(project) / "seal.json").read_text())
    assert seal["null_result"] is True and seal["seed"] is None and seal["delta_vs_seed"] is None
    records = Seal(RunDir(projects.run_dir(project))).test_rollouts()  # readable once burned
    assert {r.tag for r in records} == {"seed"} and len(records) == seal["tasks"]
    gate = capevolve(project, "careful", gate=True)
    assert gate.ret == pytest.ExitCode.USAGE_ERROR
    gate.stderr.fnmatch_lines(["*is finalized*start a new run*"])
    # one guard, one message, wherever a new best could be chosen: a grow and a screen too
    for extra in (["--capevolve-grow"], ["--capevolve-screen", "1"]):
        refused = capevolve(project, "careful", extra=extra)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str()[-2000:]
        refused.stderr.fnmatch_lines(
            ["*run * is finalized: its test split was scored*; start a new run (pytest *"]
        )
        # a way on the user can paste (issue 38, trap 4): the project's path and their own flags
        # (the fixture's -p no:cacheprovider), where it said "PROJECT" and dropped the flags
        way_on = refused.stderr.str().split("start a new run (")[1].split(")")[0]
        assert "PROJECT" not in way_on and "-p no:cacheprovider" in way_on, way_on
        assert " --capevolve-run " in way_on and " ".join(extra) in way_on, way_on
        # the command typed, in a new run (issue: it said the seed alone, the candidate dropped)
        assert "careful" in way_on and way_on.endswith(" --capevolve-new-run"), way_on


def test_finalize_needs_an_evaluated_run(example, capevolve):
    project = example("toy_calc")
    result = capevolve(project, finalize=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no run under*evaluate first*"])
    assert not (project / ".capevolve").exists()


def test_ctrl_c_before_the_burn_leaves_the_seal_unburned(pytester, example, projects, capevolve):
    project = example("toy_calc")
    # in place from the run's first session (a conftest is harness, locked with the run); it
    # acts at the finalize only
    pytester.makeconftest("def pytest_capevolve_test_scored(result, run_dir):\n    raise KeyboardInterrupt\n")
    assert capevolve(project).ret == 0
    interrupted = capevolve(project, finalize=True, subprocess=True)
    assert interrupted.ret == pytest.ExitCode.INTERRUPTED
    assert not (projects.run_dir(project) / "seal.json").exists()
    (pytester.path / "conftest.py").unlink()
    again = capevolve(project, finalize=True)
    assert again.ret == 0
    again.stdout.fnmatch_lines(["*rollouts: 0 paid, 6 reused*"])


FLAKY = '''

class FlakyCalcAdapter(ToyCalcAdapter):
    """An API outage while a marker file exists: every rollout is an infra error."""

    def run_target(self, task, ctx, *, seed):
        if Path(__file__).with_name("outage").exists():
            return Rollout(task_id=task.id, error="503 from the model API")
        return super().run_target(task, ctx, seed=seed)
'''


def test_an_outage_during_finalize_leaves_the_seal_unburned_until_complete(example, projects, capevolve):
    """In process (finalize under xdist: the first test above)."""
    project = example("toy_calc")
    projects.add_adapter(project, FLAKY, "adapter.py:FlakyCalcAdapter")
    assert capevolve(project).ret == 0
    (project / "outage").write_text("")
    broken = capevolve(project, finalize=True)
    assert broken.ret == 12, broken.stdout.str()
    broken.stdout.fnmatch_lines(["*the test split was NOT scored*seal is unburned*"])
    assert not (projects.run_dir(project) / "seal.json").exists()
    (project / "outage").unlink()
    fixed = capevolve(project, finalize=True)
    assert fixed.ret == 0, fixed.stdout.str()
    fixed.stdout.fnmatch_lines(["*rollouts: 6 paid, 0 reused*"])  # the errors were missing data
    seal = json.loads((projects.run_dir(project) / "seal.json").read_text())
    assert seal["best"]["coverage"] == 1.0 and seal["infra_errors"] == 0


def test_finalize_refuses_a_run_without_a_test_split(example, projects, capevolve):
    project = example("toy_calc")
    projects.no_test_split(project)
    assert capevolve(project).ret == 0
    result = capevolve(project, finalize=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the test split is empty, so there is no held-out score*"])
    assert not (projects.run_dir(project) / "seal.json").exists()
