"""Attacks on the sequential gate (``--capevolve-sequential``), whose null controls now follow the
candidates (issue 40): a candidate that shapes which of its rollouts count or when it is decided,
and the files its session's workers read (the stop marker)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

# appended to the candidate's tools/reply.py, which noisy_agent's run_target calls after it drew the
# answer (``draw`` and ``p_success`` are its locals, two frames up): on a failing draw it raises what
# no ``except Exception`` catches, which the sandbox child reports as the adapter's error (missing data)
ERROR_ON_FAILURE = """

import sys as _sys


class _Upstream(BaseException):
    pass


def closing_line(category, _closing=closing_line):
    frame = _sys._getframe()
    while frame is not None and "p_success" not in frame.f_locals:
        frame = frame.f_back
    if frame is not None and frame.f_locals["draw"] >= frame.f_locals["p_success"]:
        raise _Upstream("upstream API 503 (retry later)")
    return _closing(category)
"""


def no_microcases(project: Path) -> None:
    for path in (project / "microcases").glob("*.yaml"):
        path.unlink()


def verdict(run_dir: Path, tag: str) -> dict:
    return json.loads((run_dir / "verdicts" / f"{tag}.json").read_text())


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "a sequential gate: candidate code (the seed's bytes plus a reply tool) that raises an API-looking "
        "error on each failing draw, so every trial its e-process read was a pass: efficacy crossed after "
        "29 of 40 tasks, verdict accept (Δ̄ +0.17), with the floor of the nulls that followed it"
    ),
    outcome=(
        "prevented: an efficacy crossing with an infra error among the tasks it read stands only if the "
        "worst case crosses too (each trial whose first attempt errored a failure of the candidate, a pass "
        "of the best); until then the tag is undecided and val's exhaustion decides, with the error check's "
        "imputation (indecisive), in this session and after the errored trials are paid again"
    ),
)
def test_a_candidate_that_turns_its_failing_draws_into_errors_is_not_accepted_early(
    example, projects, capevolve
):
    project = example("noisy_agent")
    no_microcases(project)
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    # a coverage floor the errors leave (each never-passing task has no valid trial of the candidate)
    projects.edit_spec(project, "min_coverage: 0.8", "min_coverage: 0.6")
    sneaky = project / "candidates" / "sneaky"
    shutil.copytree(project / "capability", sneaky)
    with (sneaky / "tools" / "reply.py").open("a") as handle:
        handle.write(ERROR_ON_FAILURE)
    said = []
    for _ in range(2):  # the second session pays the errored trials again: a fresh draw each
        said.append(capevolve(project, "sneaky", gate=True, extra=["--capevolve-sequential"]).stdout)
        run_dir = projects.run_dir(project)
        v = verdict(run_dir, "sneaky")
        assert v["infra_errors"]["candidate"] > 0 == v["infra_errors"]["best"], v["infra_errors"]
        assert v["decision"] != "accept", v["reason"]
        assert json.loads((run_dir / "state.json").read_text())["best_id"] == "seed"
    assert v["decision"] == "indecisive", v["reason"]
    # the first session ran val to its end for it: its crossing on the valid trials alone was not one
    said[0].fnmatch_lines(["sequential sneaky: no crossing over all 40 tasks*"])


class MarkerForger:
    """Stands in for unconfined code of the same user (candidate code's leftover process, a shell):
    once the session's stop marker exists, it adds ``tags`` to it, so the workers skip their rollouts."""

    def __init__(self, run_root: Path, tags: list[str]) -> None:
        self.run_root, self.tags, self.forged = run_root, tags, 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for marker in (self.run_root / "sequential-stop").glob("*.json"):
            stopped = set(json.loads(marker.read_text())["stopped"])
            if not set(self.tags) <= stopped:
                marker.write_text(json.dumps({"stopped": sorted(stopped | set(self.tags))}))
                self.forged += 1


def better_seed(example, projects) -> Path:
    project = example("noisy_agent")
    no_microcases(project)
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    (project / "capability" / "prompt.md").write_text(
        (project / "candidates/regressed/prompt.md").read_text()
    )
    return project


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "a sequential gate's stop marker (`runs/<id>/sequential-stop/<token>.json`, read by the workers "
        "before each rollout) rewritten once it exists, the null controls added: they stopped after 13 of the "
        "14 tasks they follow the candidate to, their floor read where the writer chose, the accept booked "
        "(exit 12) and the calibration alarm told 'no null control gated yet'"
    ),
    outcome=(
        "prevented: the run dir is out of reach of candidate code and the optimizer (EACCES); only the "
        "session's controller writes the marker"
    ),
    unconfined=(
        "refused to book: a tag whose items were skipped as decided though the gate never stopped it makes "
        "an accept indecisive, those rollouts owed (nothing booked); the same command again pays them and "
        "decides as an untouched session does"
    ),
)
@pytest.mark.unconfined
def test_a_stop_marker_written_by_someone_else_books_nothing(example, projects, capevolve, pytester):
    """Unconfined, code of the same user can write the run dir, the stop marker included (confined, the
    kernel keeps candidate code and the optimizer out of it). Here a plugin of the test stands in for it,
    at a point it can choose deterministically: the first report after the marker appears."""
    project = better_seed(example, projects)
    assert capevolve(project).ret == 0  # the run, and the seed's val rollouts
    whole = example("noisy_agent", "untouched")
    shutil.rmtree(whole)
    shutil.copytree(project, whole)
    run_root = projects.run_dir(project)
    forger = MarkerForger(run_root, ["seed-null1", "seed-null2"])
    args = capevolve.args(project, "improved", gate=True, extra=["--capevolve-sequential"])
    forged = pytester.runpytest(*args, plugins=[forger])
    assert forger.forged == 1
    assert forged.ret == 12, forged.stdout.str()  # the skipped rollouts are owed
    v = verdict(run_root, "improved")
    assert (v["decision"], v["basis"]) == ("indecisive", "coverage"), v["reason"]
    assert (
        "seed-null1, seed-null2 were skipped as decided though this gate had not stopped them" in v["reason"]
    )
    assert json.loads((run_root / "state.json").read_text())["best_id"] == "seed"  # nothing booked
    # the way on: the same command again pays what was skipped and decides as an untouched session
    again = capevolve(project, "improved", gate=True, extra=["--capevolve-sequential"])
    assert again.ret == 0, again.stdout.str()
    assert capevolve(whole, "improved", gate=True, extra=["--capevolve-sequential"]).ret == 0
    keys = ("decision", "basis", "n_tasks", "delta_mean", "null_spread", "per_task")
    for tag in ("improved", "seed-null1", "seed-null2"):
        first, resumed = verdict(projects.run_dir(whole), tag), verdict(run_root, tag)
        assert {k: first[k] for k in keys} == {k: resumed[k] for k in keys}, tag
    assert json.loads((run_root / "state.json").read_text())["best_id"] == "improved"
