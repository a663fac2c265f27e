"""The readers of other tools' outputs, each on a small file its tool wrote (tests/data/compare/,
with the script that made it) or, where said, written from the tool's documented format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_capevolve._imported.compare import CompareSettings, compare_runs
from pytest_capevolve._imported.readers import ReadOptions, read_results
from pytest_capevolve._imported.results import ResultsError

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"


def test_deepeval_test_runs_read_one_metric_per_case() -> None:
    base = read_results(DATA / "deepeval_baseline.json")
    cand = read_results(DATA / "deepeval_candidate.json")
    assert base.source == cand.source == "deepeval"
    assert base.task_ids == [f"q{i}" for i in range(6)]
    assert [o.reward for o in base.outcomes] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert [o.reward for o in cand.outcomes] == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    assert base.notes[0] == "metric Exact Answer"
    [result] = compare_runs(base, [cand], CompareSettings()).pairs
    # two tasks fixed of six: p = 1/4 exactly, not enough for α = 0.05
    assert result.verdict.p_exact == "1/4" and result.verdict.decision == "reject"
    assert result.band_moves == {"defect→solid": 2}


def test_deepeval_success_and_a_missing_metric(tmp_path: Path) -> None:
    run = read_results(DATA / "deepeval_candidate.json", options=ReadOptions(scorer="success"))
    assert [o.reward for o in run.outcomes] == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    with pytest.raises(ResultsError, match="no metric 'Faithfulness'.*Exact Answer"):
        read_results(DATA / "deepeval_candidate.json", options=ReadOptions(scorer="Faithfulness"))
    # a metric that errored is missing data, never a 0
    doc = json.loads((DATA / "deepeval_candidate.json").read_text(encoding="utf-8"))
    doc["testCases"][0]["metricsData"][0].update(score=None, error="judge timed out")
    path = tmp_path / "errored.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    first = read_results(path).outcomes[0]
    assert first.reward is None and first.error == "judge timed out"
