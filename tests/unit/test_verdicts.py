"""From persisted rollouts to verdict files (policy/verdicts.py, store/evidence.py): the gate
config from the spec and overrides, the evidence the gate is given (tags, sizes, infra counts,
null deltas), the calibration alarm and the verdict file with its event. Each test was written to
kill a mutant (``python benchmarks/mutation.py``)."""

from __future__ import annotations

import json

import numpy as np

from pytest_capevolve._decide import gate
from pytest_capevolve._decide import verdict as verdict_types
from pytest_capevolve._decide.verdict import ACCEPT, REJECT, GateConfig
from pytest_capevolve._policy.gate import verdicts as judging
from pytest_capevolve._project.spec import Spec
from pytest_capevolve._store.readers import evidence
from pytest_capevolve._store.rollouts.record import RolloutRecord
from pytest_capevolve._store.rundir import RunDir

ANY_COVERAGE = gate.GateConfig(min_coverage=0.0)


def judge(candidate, best, config=ANY_COVERAGE, **kw):
    candidate, best = np.asarray(candidate, float), np.asarray(best, float)
    ids = [f"t{i}" for i in range(len(candidate))]
    return gate.decide(candidate, best, tag="cand", against="best", task_ids=ids, config=config, **kw)


def test_gate_config_takes_the_spec_and_the_overrides(tmp_path):
    spec = Spec(
        path=tmp_path / "capevolve.yaml",
        project_dir=tmp_path,
        adapter="a.py:A",
        capability_path=tmp_path,
        base_seed=7,
        success_threshold=0.9,
        gate_mode="paired",
        gate_k_se=0.3,
        gate_alpha=0.01,
        gate_threshold=0.2,
        min_coverage=0.6,
    )
    assert judging.gate_config(spec) == gate.GateConfig(
        mode="paired", alpha=0.01, k_se=0.3, threshold=0.2, min_coverage=0.6, success_threshold=0.9, seed=7
    )
    override = judging.gate_config(spec, mode="exact", k_se=2.0, alpha=0.1, veto_regressions=True)
    assert (override.mode, override.k_se, override.alpha, override.veto_regressions) == (
        "exact",
        2.0,
        0.1,
        True,
    )
    assert judging.gate_config(spec, k_se=0.0, alpha=0.0).k_se == 0.0


def test_evidence_judges_from_records_and_counts_infra_errors(tmp_path, val_rollout):
    record = val_rollout
    (tmp_path / "run").mkdir()
    rundir = RunDir(tmp_path / "run")
    for tag, size in (("cand", 3), ("best", 5)):
        files = rundir.snapshots.snapshot_dir(tag)
        files.mkdir(parents=True)
        (files / "prompt.md").write_text("x" * size)
        (files / "sub").mkdir()
        (files / "sub" / "tool.py").write_text("y")
    records = [record("cand", f"t{i}", k, 1.0) for i in range(5) for k in range(2)]
    records += [record("best", f"t{i}", k, 0.0) for i in range(5) for k in range(2) if (i, k) != (4, 1)]
    records += [record("best", "t4", 1, None, infra="timeout"), record("best", "t9", 0, None, infra="x")]
    ids = [f"t{i}" for i in range(5)]
    ev = judging.Evidence(evidence.index_records(records), ids, 2, rundir.snapshots.snapshot_size)
    assert ev.size("cand") == 4 and ev.size("best") == 6
    assert np.isnan(ev.matrix("best")[4, 1]) and ev.matrix("nobody").shape == (5, 2)
    config = gate.GateConfig(mode="simplicity_tiebreak")
    verdict = ev.judge("cand", "best", config, null_deltas=[0.1])
    assert verdict.infra_errors == {"candidate": 0, "best": 1}
    assert verdict.null_spread == 0.1 and verdict.decision == ACCEPT
    tie = ev.judge("cand", "cand", config)
    assert tie.decision == REJECT  # same size: no simpler tie


def test_null_deltas_and_the_calibration_alarm():
    accepted = judge(np.ones((6, 1)), np.zeros((6, 1)))
    rejected = judge(np.zeros((6, 1)), np.zeros((6, 1)))
    coverage = judge(np.full((6, 1), np.nan), np.zeros((6, 1)))
    assert judging.null_deltas([accepted, rejected, coverage]) == [1.0, 0.0]
    alarm = judging.as_null(accepted)
    assert alarm.decision == ACCEPT and len(alarm.warnings) == 1 and "CALIBRATION ALARM" in alarm.warnings[0]
    assert accepted.warnings == []  # the original verdict is not changed
    assert judging.as_null(rejected) is rejected


def test_write_verdict_writes_the_file_and_logs_the_event(tmp_path):
    (tmp_path / "run").mkdir()
    rundir = RunDir(tmp_path / "run")
    verdict = judge(np.ones((6, 1)), np.zeros((6, 1)))
    rundir.verdicts.write_verdict(judging.verdict_file(verdict, null_control=False))
    data = json.loads(rundir.verdicts.verdict_path("cand").read_text())
    assert data["decision"] == ACCEPT and data["null_control"] is False and data["p_exact"] == "1/64"
    assert data["rollouts"] == "rollouts/val/*.json whose tag is cand, against those whose tag is best"
    event = json.loads(rundir.events_path.read_text().splitlines()[-1])
    assert event["kind"] == "verdict" and event["tag"] == "cand" and event["against"] == "best"
    assert (event["decision"], event["basis"], event["p_value"], event["delta_mean"]) == (
        ACCEPT,
        "exact",
        1 / 64,
        1.0,
    )
    refused = verdict_types.Verdict(
        tag="r",
        against="best",
        decision=REJECT,
        basis="micro_test_fail",
        reason="x",
        mode="exact",
        min_coverage=0.8,
    )
    rundir.verdicts.write_verdict(judging.verdict_file(refused))
    assert json.loads(rundir.verdicts.verdict_path("r").read_text())["rollouts"].startswith("none")


def test_evidence_passes_tags_sizes_and_infra_counts(tmp_path, val_rollout):
    record = val_rollout
    (tmp_path / "run").mkdir()
    rundir = RunDir(tmp_path / "run")
    for tag, size in (("small", 1), ("big", 9)):
        files = rundir.snapshots.snapshot_dir(tag)
        files.mkdir(parents=True)
        (files / "prompt.md").write_text("x" * size)
    records = [record(tag, f"t{i}", 0, 1.0) for tag in ("small", "big") for i in range(4)]
    records += [record("small", "t0", 1, None, infra="timeout"), record("big", "t0", 1, None, infra="x")]
    ev = judging.Evidence(
        evidence.index_records(records), [f"t{i}" for i in range(4)], 2, rundir.snapshots.snapshot_size
    )
    verdict = ev.judge("small", "big", gate.GateConfig(mode="simplicity_tiebreak"))
    assert (verdict.tag, verdict.against, verdict.decision) == ("small", "big", ACCEPT)  # a tie, smaller wins
    assert verdict.infra_errors == {"candidate": 1, "best": 1}
    assert ev.judge("big", "small", gate.GateConfig(mode="simplicity_tiebreak")).decision == REJECT


def test_the_calibration_alarm_says_what_it_means():
    alarm = judging.as_null(judge(np.ones((6, 1)), np.zeros((6, 1))))
    assert alarm.warnings == [
        "CALIBRATION ALARM: a byte-identical copy of the best was accepted; "
        "the gate is not holding its error rate on this run"
    ]


def test_evidence_asks_for_snapshot_sizes_only_in_simplicity_tiebreak_mode():
    records = [
        RolloutRecord(
            run_id="r", split="val", task_id=f"t{i}", tag=tag, trial=0, seed=0, candidate_hash="h", reward=1.0
        )
        for tag in ("a", "b")
        for i in range(3)
    ]
    asked: list[str] = []
    ev = judging.Evidence(
        evidence.index_records(records), ["t0", "t1", "t2"], 1, lambda t: asked.append(t) or 5
    )
    for mode in ("exact", "strict", "paired"):
        ev.judge("a", "b", GateConfig(mode=mode))
    assert asked == []
    ev.judge("a", "b", GateConfig(mode="simplicity_tiebreak"))
    assert asked == ["a", "b"]
