"""The sealed test split: one finalize per run, crash-safe, race-free, and unreadable before."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import add_adapter, copy_example, edit_spec, no_test_split, run_dir
from pytest_capevolve.decide.gate import GateConfig, GateSplitError, decide
from pytest_capevolve.store.rundir import RunDir
from pytest_capevolve.store.seal import Seal, TestSealError

NO_CACHE = ["-p", "no:cacheprovider"]


def gated_project(pytester: pytest.Pytester):
    """noisy_agent with 2 trials, after a gate that made 'improved' the best."""
    project = copy_example(pytester, "noisy_agent")
    edit_spec(project, "num_trials: 5", "num_trials: 2")
    result = pytester.runpytest(
        "--capevolve-run",
        str(project),
        "--capevolve-candidate",
        str(project / "candidates/improved"),
        "--capevolve-gate",
        *NO_CACHE,
    )
    assert result.ret == 0, result.stdout.str()
    assert json.loads((run_dir(project) / "state.json").read_text())["best_id"] == "improved"
    return project


def held_out_files(project) -> list[str]:
    return sorted(p.name for p in (run_dir(project) / "rollouts" / "test").glob("*.json"))


def events(project, kind: str) -> list[dict]:
    lines = (run_dir(project) / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == kind]


def test_finalize_scores_best_and_seed_once_then_refuses(pytester, xdist_args):
    project = gated_project(pytester)
    first = pytester.runpytest("--capevolve-finalize", str(project), *NO_CACHE, *xdist_args)
    assert first.ret == 0, first.stdout.str()
    seal = json.loads((run_dir(project) / "seal.json").read_text())
    test_ids = json.loads((run_dir(project) / "splits.json").read_text())["test"]
    assert seal["best"]["tag"] == "improved" and seal["seed"]["tag"] == "seed"
    assert seal["tasks"] == len(test_ids) == 24 and seal["trials"] == 2
    assert seal["delta_vs_seed"]["n"] == 24
    assert abs(seal["delta_vs_seed"]["mean"] - (seal["best"]["mean"] - seal["seed"]["mean"])) < 1e-12
    assert len(held_out_files(project)) == 24 * 2 * 2
    first.stdout.fnmatch_lines(["*test split scored once and sealed: best 'improved' mean*"])

    paid_before = len(events(project, "rollout"))
    files_before = held_out_files(project)
    second = pytester.runpytest("--capevolve-finalize", str(project), *NO_CACHE, *xdist_args)
    assert second.ret == pytest.ExitCode.USAGE_ERROR
    second.stderr.fnmatch_lines(["*TestSealError*already scored*exactly once per run*"])
    assert len(events(project, "rollout")) == paid_before
    assert held_out_files(project) == files_before
    assert json.loads((run_dir(project) / "seal.json").read_text()) == seal


KILL_BEFORE_BURN = """
import json, os, signal
from pathlib import Path

def pytest_capevolve_test_scored(result, run_dir):
    marker = Path(__file__).with_name("kill-before-burn")
    if marker.exists():
        marker.write_text(json.dumps(result["best"]["mean"]))
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_finalize_killed_between_scoring_and_writing_leaves_the_seal_unburned(pytester, xdist_args):
    project = gated_project(pytester)
    pytester.makeconftest(KILL_BEFORE_BURN)
    marker = pytester.path / "kill-before-burn"
    marker.write_text("")
    killed = pytester.runpytest_subprocess("--capevolve-finalize", str(project), *NO_CACHE, *xdist_args)
    assert killed.ret == -9, killed.stdout.str()
    rundir = run_dir(project)
    assert not (rundir / "seal.json").exists()
    assert not list(rundir.glob("**/*.tmp"))  # nothing half-written
    assert len(held_out_files(project)) == 24 * 2 * 2  # every scored rollout was kept
    mean_seen = json.loads(marker.read_text())
    marker.unlink()

    again = pytester.runpytest_subprocess("--capevolve-finalize", str(project), *NO_CACHE, *xdist_args)
    assert again.ret == 0, again.stdout.str()
    again.stdout.fnmatch_lines(["*rollouts: 0 paid, 96 reused*"])
    seal = json.loads((rundir / "seal.json").read_text())
    assert seal["best"]["mean"] == mean_seen  # the crash could not redraw the test score
    assert len(events(project, "test_scored")) == 1


def test_eight_concurrent_finalizes_score_exactly_once(pytester):
    project = gated_project(pytester)
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


def test_test_split_is_refused_by_every_evaluation_path(pytester):
    project = copy_example(pytester, "toy_calc")
    by_flag = pytester.runpytest("--capevolve-run", str(project), "--capevolve-split", "test", *NO_CACHE)
    assert by_flag.ret == pytest.ExitCode.USAGE_ERROR
    by_flag.stderr.fnmatch_lines(["*test split is sealed*--capevolve-finalize*"])

    pytester.makeini("[pytest]\ncapevolve_split = test\n")
    by_ini = pytester.runpytest("--capevolve-run", str(project), *NO_CACHE)
    assert by_ini.ret == pytest.ExitCode.USAGE_ERROR
    by_ini.stderr.fnmatch_lines(["*test split is sealed*"])
    (pytester.path / "tox.ini").unlink()

    assert pytester.runpytest("--capevolve-run", str(project), *NO_CACHE).ret == 0
    both = pytester.runpytest("--capevolve-run", str(project), "--capevolve-finalize", str(project))
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    with_gate = pytester.runpytest("--capevolve-finalize", str(project), "--capevolve-gate")
    with_gate.stderr.fnmatch_lines(["*--capevolve-gate does not apply to --capevolve-finalize*"])

    rundir = RunDir(run_dir(project))
    with pytest.raises(TestSealError, match="only through the seal"):
        rundir.rollouts("test")
    with pytest.raises(TestSealError, match="sealed until finalize"):
        Seal(rundir).test_rollouts()
    with pytest.raises(GateSplitError):
        decide([[1.0]], [[0.0]], tag="a", against="b", task_ids=["t"], config=GateConfig(), split="test")


def test_after_finalize_no_new_best_can_be_chosen_in_the_run(pytester):
    project = copy_example(pytester, "toy_calc")
    assert pytester.runpytest("--capevolve-run", str(project), *NO_CACHE).ret == 0
    assert pytester.runpytest("--capevolve-finalize", str(project), *NO_CACHE).ret == 0
    seal = json.loads((run_dir(project) / "seal.json").read_text())
    assert seal["null_result"] is True and seal["seed"] is None and seal["delta_vs_seed"] is None
    records = Seal(RunDir(run_dir(project))).test_rollouts()  # readable once burned
    assert {r.tag for r in records} == {"seed"} and len(records) == seal["tasks"]
    gate = pytester.runpytest(
        "--capevolve-run",
        str(project),
        "--capevolve-candidate",
        str(project / "candidates/careful"),
        "--capevolve-gate",
        *NO_CACHE,
    )
    assert gate.ret == pytest.ExitCode.USAGE_ERROR
    gate.stderr.fnmatch_lines(["*is finalized*start a new run*"])


def test_finalize_needs_an_evaluated_run(pytester):
    project = copy_example(pytester, "toy_calc")
    result = pytester.runpytest("--capevolve-finalize", str(project), *NO_CACHE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no run under*evaluate first*"])
    assert not (project / ".capevolve").exists()


def test_ctrl_c_before_the_burn_leaves_the_seal_unburned(pytester):
    project = copy_example(pytester, "toy_calc")
    assert pytester.runpytest("--capevolve-run", str(project), *NO_CACHE).ret == 0
    pytester.makeconftest("def pytest_capevolve_test_scored(result, run_dir):\n    raise KeyboardInterrupt\n")
    interrupted = pytester.runpytest_subprocess("--capevolve-finalize", str(project), *NO_CACHE)
    assert interrupted.ret == pytest.ExitCode.INTERRUPTED
    assert not (run_dir(project) / "seal.json").exists()
    (pytester.path / "conftest.py").unlink()
    again = pytester.runpytest("--capevolve-finalize", str(project), *NO_CACHE)
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


def test_an_outage_during_finalize_leaves_the_seal_unburned_until_complete(pytester, xdist_args):
    project = copy_example(pytester, "toy_calc")
    add_adapter(project, FLAKY, "adapter.py:FlakyCalcAdapter")
    assert pytester.runpytest("--capevolve-run", str(project), *NO_CACHE).ret == 0
    (project / "outage").write_text("")
    broken = pytester.runpytest("--capevolve-finalize", str(project), *NO_CACHE, *xdist_args)
    assert broken.ret == 12, broken.stdout.str()
    broken.stdout.fnmatch_lines(["*the test split was NOT scored*seal is unburned*"])
    assert not (run_dir(project) / "seal.json").exists()
    (project / "outage").unlink()
    fixed = pytester.runpytest("--capevolve-finalize", str(project), *NO_CACHE, *xdist_args)
    assert fixed.ret == 0, fixed.stdout.str()
    fixed.stdout.fnmatch_lines(["*rollouts: 6 paid, 0 reused*"])  # the errors were missing data
    seal = json.loads((run_dir(project) / "seal.json").read_text())
    assert seal["best"]["coverage"] == 1.0 and seal["infra_errors"] == 0


def test_finalize_refuses_a_run_without_a_test_split(pytester):
    project = copy_example(pytester, "toy_calc")
    no_test_split(project)
    assert pytester.runpytest("--capevolve-run", str(project), *NO_CACHE).ret == 0
    result = pytester.runpytest("--capevolve-finalize", str(project), *NO_CACHE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the test split is empty, so there is no held-out score*"])
    assert not (run_dir(project) / "seal.json").exists()
