"""Issue 37, class 2: the log takes events from anyone who can append to it.

The optimizer's shell (or candidate code from its sandbox child) appends correctly chained
``rollout`` events through the package's own ``RunDir`` API, and the gate reused them: val reads
the first outcome of a key. Now each rollout event must be paid by a session whose logged claim
holds its key, once: before a decision reads the log, one that is not is refused, naming it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main
from pytest_capevolve._store.rollouts.record import RolloutRecord
from pytest_capevolve._store.rundir import RunDir

VAL = ("n01", "n02", "n10", "n13")  # val ids of noisy_agent's frozen splits (split_seed 7)


def _project(example, projects) -> Path:
    project = example("noisy_agent")
    projects.one_trial_with_noop(project, "Be courteous.")
    return project


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def _refused(result) -> str:
    out = result.stdout.str()
    assert result.ret == 11, out[-3000:]
    lines = [line for line in out.splitlines() if "holds rollouts no session paid as recorded" in line]
    assert len(lines) == 1, out[-3000:]
    assert "capevolve verify" in lines[0] and "--capevolve-new-run" in lines[0]
    return lines[0]


@pytest.mark.attack(
    "record",
    attack=(
        "correctly chained `rollout` events appended through the package's own API "
        "(`RunDir(run).rollouts.record_rollout`) by a shell or by candidate code, outside any session: "
        "a pass for each val rollout of a no-op before a session paid it (accepted, before: val reads "
        "a key's first outcome)"
    ),
    outcome=(
        "refused before the gate reads the log (exit 11, no verdict): each session logs its claim "
        "(`claimed`) and every rollout event names it; an event no logged claim holds is named"
    ),
)
def test_rollouts_appended_through_the_api_outside_a_session_are_refused_before_the_gate(
    example, projects, capevolve, capsys
) -> None:
    project = _project(example, projects)
    assert capevolve(project).ret == 0  # the baseline: the seed's val rollouts
    run_dir = projects.run_dir(project)
    seed_record = next(r for k, r in projects.rollout_records(project).items() if k[2] == "seed")
    # the forger: a pass for every val rollout of the no-op, before any session pays it
    rundir = RunDir(run_dir)
    val = json.loads((run_dir / "splits.json").read_text())["val"]
    for task_id in val:
        rundir.rollouts.record_rollout(
            RolloutRecord(
                run_id=rundir.run_id,
                split="val",
                task_id=task_id,
                tag="noop",
                trial=0,
                seed=seed_record["seed"],
                candidate_hash="0" * 64,
                reward=1.0,
                passed=True,
                output="resolved",
            )
        )
    rundir.rollouts.flush(leaving=True)
    result = capevolve(project, "noop", gate=True)
    line = _refused(result)
    assert "no session's claim holds it (written outside a session)" in line
    verdict = run_dir / "verdicts" / "noop.json"
    assert not verdict.exists() or json.loads(verdict.read_text())["decision"] != "accept"
    assert not [e for e in _events(run_dir) if e["kind"] == "decision" and e.get("decision") == "accept"]
    # nor does `capevolve gate` derive a verdict from them
    capsys.readouterr()
    assert main(["gate", "noop", "--project", str(project)]) != 0
    assert "no session's claim holds it" in capsys.readouterr().err


@pytest.mark.attack(
    "record",
    attack=(
        "a paid key logged again as a pass, the forger copying the paying session's claim id (found by "
        "`verify` only, after the decision)"
    ),
    outcome=(
        "refused before the gate and before the seal: a key in two valid rollout events with no "
        "quarantine or vanish of its file between"
    ),
)
def test_a_key_logged_twice_is_refused_before_the_gate_not_only_by_verify(
    example, projects, capevolve
) -> None:
    project = _project(example, projects)
    assert capevolve(project, "noop").ret == 0  # paid, not gated
    run_dir = projects.run_dir(project)
    paid = [e for e in _events(run_dir) if e["kind"] == "rollout" and e["tag"] == "noop"]
    claim = paid[0].get("claim")  # a forger that copies the paying session's claim
    rundir = RunDir(run_dir)
    rundir.claims.claim_id = claim
    for event in paid:
        if event["reward"] == 0.0:  # each failure logged again as a pass
            record = RolloutRecord.from_json(
                json.loads(rundir.rollout_path("val", event["task_id"], "noop", 0).read_text())
            )
            rundir.rollouts.record_rollout(dataclasses.replace(record, reward=1.0, passed=True))
    rundir.rollouts.flush(leaving=True)
    line = _refused(capevolve(project, "noop", gate=True))
    assert "paid 2 times" in line and "with no quarantine or vanish of its file between" in line
