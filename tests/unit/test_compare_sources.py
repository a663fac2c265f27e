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
    base = read_results(DATA / "deepeval" / "deepeval_baseline.json")
    cand = read_results(DATA / "deepeval" / "deepeval_candidate.json")
    assert base.source == cand.source == "deepeval"
    assert base.task_ids == [f"q{i}" for i in range(6)]
    assert [o.reward for o in base.outcomes] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert [o.reward for o in cand.outcomes] == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    assert base.notes[0] == "metric Exact Answer"
    compared = compare_runs(base, [cand], CompareSettings())
    [result] = compared.pairs
    # one trial per case: nothing is paired by position, so the answer does not say it is
    assert not any("paired by position" in line for line in compared.promises()["do_not_hold"])
    # two tasks fixed of six: p = 1/4 exactly, not enough for α = 0.05
    assert result.verdict.p_exact == "1/4" and result.verdict.decision == "reject"
    assert result.band_moves == {"defect→solid": 2}


def test_deepeval_success_and_a_missing_metric(tmp_path: Path) -> None:
    run = read_results(DATA / "deepeval" / "deepeval_candidate.json", options=ReadOptions(scorer="success"))
    assert [o.reward for o in run.outcomes] == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    with pytest.raises(ResultsError, match="no metric 'Faithfulness'.*Exact Answer"):
        read_results(
            DATA / "deepeval" / "deepeval_candidate.json", options=ReadOptions(scorer="Faithfulness")
        )
    # a metric that errored is missing data, never a 0
    doc = json.loads((DATA / "deepeval" / "deepeval_candidate.json").read_text(encoding="utf-8"))
    doc["testCases"][0]["metricsData"][0].update(score=None, error="judge timed out")
    path = tmp_path / "errored.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    first = read_results(path).outcomes[0]
    assert first.reward is None and first.error == "judge timed out"


def test_lm_eval_samples_read_one_metric_per_document(tmp_path: Path) -> None:
    folder = DATA / "lm_eval"
    sloppy = read_results(folder / "samples_arith_mc_sloppy.jsonl")
    careful = read_results(folder / "samples_arith_mc_careful.jsonl")
    assert sloppy.source == careful.source == "lm_eval"
    assert sloppy.task_ids == [str(i) for i in range(10)] and sloppy.notes[0] == "metric acc, filter none"
    # the mock models of make_lm_eval_samples.py: careful misses questions 3 and 7, sloppy all
    # but 0, 1 and 2
    assert [o.reward for o in careful.outcomes] == [0.0 if i in (3, 7) else 1.0 for i in range(10)]
    assert [o.reward for o in sloppy.outcomes] == [1.0 if i < 3 else 0.0 for i in range(10)]
    [result] = compare_runs(sloppy, [careful], CompareSettings()).pairs
    assert result.verdict.p_exact == "1/32" and result.verdict.decision == "accept"
    with pytest.raises(ResultsError, match="no metric 'exact_match'.*its metrics: acc"):
        read_results(folder / "samples_arith_mc_careful.jsonl", options=ReadOptions(scorer="exact_match"))
    with pytest.raises(ResultsError, match="no filter 'strict'.*none"):
        read_results(folder / "samples_arith_mc_careful.jsonl", options=ReadOptions(scorer="acc,strict"))
    # a metric on another scale is refused, never clamped
    rows = (folder / "samples_arith_mc_careful.jsonl").read_text(encoding="utf-8").splitlines()
    bleu = [json.dumps({**json.loads(r), "metrics": ["bleu"], "bleu": 37.5}) for r in rows]
    (tmp_path / "samples_bleu.jsonl").write_text("\n".join(bleu) + "\n", encoding="utf-8")
    with pytest.raises(ResultsError, match="outside \\[0, 1\\]"):
        read_results(tmp_path / "samples_bleu.jsonl")


def test_promptfoo_output_reads_one_arm_with_repeats_as_trials(tmp_path: Path) -> None:
    path = DATA / "promptfoo" / "results.json"
    with pytest.raises(ResultsError, match="holds 2 arms.*--arm"):
        read_results(path)
    chatty = read_results(path, options=ReadOptions(arm="chatty"))
    terse = read_results(path, options=ReadOptions(arm="terse"))
    assert chatty.source == "promptfoo" and chatty.label == "results.json [chatty]"
    # 10 tests run twice (--repeat 2): 10 tasks of 2 trials, never 20 tasks
    assert len(terse.task_ids) == 10 and len(terse.outcomes) == 20 and terse.task_ids[0] == "sum-a"
    assert all(o.reward == 0.0 for o in chatty.outcomes)  # chatty answers fail promptfoo's equals
    compared = compare_runs(chatty, [terse], CompareSettings())
    [result] = compared.pairs
    assert result.verdict.n_tasks == 10 and result.pairing.trials_by == "position"
    # promptfoo numbers no repeats: the answer says the two trials were paired by position
    assert any("paired by position" in line for line in compared.promises()["do_not_hold"])
    assert result.verdict.p_exact == "1/32" and result.verdict.decision == "accept"
    success = read_results(path, options=ReadOptions(arm="terse", scorer="success"))
    assert [o.reward for o in success.outcomes] == [o.reward for o in terse.outcomes]
    with pytest.raises(ResultsError, match="no arm 'verbose'"):
        read_results(path, options=ReadOptions(arm="verbose"))
    with pytest.raises(ResultsError, match="--arm names an arm of a promptfoo file"):
        read_results(DATA / "deepeval" / "deepeval_baseline.json", options=ReadOptions(arm="x"))
    # a row promptfoo could not run (failureReason 2: ERROR) is missing data, never a 0
    doc = json.loads(path.read_text(encoding="utf-8"))
    row = next(r for r in doc["results"]["results"] if r["prompt"]["label"] == "terse")
    row.update(failureReason=2, error="provider timed out", score=0, gradingResult=None)
    errored = tmp_path / "errored.json"
    errored.write_text(json.dumps(doc), encoding="utf-8")
    first = read_results(errored, options=ReadOptions(arm="terse")).outcomes[0]
    assert first.reward is None and first.error == "provider timed out"
    # `-o results.jsonl` writes the same rows, one a line: read as promptfoo's, not as a table whose
    # failed assertions (their `error` set) were missing data and every row a task of its own
    lines = tmp_path / "results.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in doc["results"]["results"]), encoding="utf-8")
    from_lines = read_results(lines, options=ReadOptions(arm="chatty"))
    assert from_lines.source == "promptfoo" and from_lines.outcomes == chatty.outcomes


def test_an_inspect_seed_is_read_where_eval_given_a_model_object_records_it() -> None:
    # inspect_ai.eval(task, model=get_model("mockllm/model", ...), seed=0) leaves the model's
    # generate config without a seed and records it in the plan's: read as "no seed" before
    from types import SimpleNamespace as NS

    from pytest_capevolve._imported.inspect_log import log_seed

    def log(plan: int | None, model: int | None) -> NS:
        return NS(plan=NS(config=NS(seed=plan)), eval=NS(model_generate_config=NS(seed=model)))

    assert log_seed(log(plan=0, model=None)) == "0"
    assert log_seed(log(plan=None, model=3)) == "3"  # `inspect eval --seed 3` as the CLI records it
    assert log_seed(log(plan=None, model=None)) is None
    assert log_seed(NS(plan=NS(), eval=NS(model_generate_config=None))) is None


def test_a_file_inspect_cannot_read_is_refused_in_one_line() -> None:
    """`--format inspect` on promptfoo's output: inspect's reader raised a pydantic error of four
    lines (a link to pydantic's docs last), printed as the `error:` line and three more."""
    pytest.importorskip("inspect_ai")
    with pytest.raises(ResultsError) as caught:
        read_results(DATA / "promptfoo" / "results.json", format="inspect")
    said = str(caught.value)
    assert "\n" not in said and said.startswith(
        f"{DATA / 'promptfoo' / 'results.json'}: inspect_ai could not"
    )
    assert "not an inspect_ai log" in said and "--format" in said


def test_samples_of_another_lm_eval_task_under_the_same_doc_ids_are_refused(tmp_path: Path) -> None:
    """doc_id is a position: another task's (or dataset version's) samples share every id. The
    file's doc_hash says which document a line is."""
    careful = DATA / "lm_eval" / "samples_arith_mc_careful.jsonl"
    rows = [json.loads(line) for line in careful.read_text(encoding="utf-8").splitlines()]
    for row in rows[3:]:
        row["doc"]["question"] += " (v2)"
        row["doc_hash"] = row["doc_hash"][::-1]
    other = tmp_path / "samples_arith_mc_v2.jsonl"
    other.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    sloppy = read_results(DATA / "lm_eval" / "samples_arith_mc_sloppy.jsonl")
    with pytest.raises(ResultsError, match=r"task '3' is not the same task in .*\(7 of 10 shared ids so\)"):
        compare_runs(sloppy, [read_results(other)], CompareSettings())
    assert compare_runs(sloppy, [read_results(careful)], CompareSettings()).decisions == ["accept"]


def test_a_deepeval_case_whose_input_changed_is_not_paired_with_the_old_one(tmp_path: Path) -> None:
    doc = json.loads((DATA / "deepeval" / "deepeval_candidate.json").read_text(encoding="utf-8"))
    doc["testCases"][0]["input"] = "a question the baseline never saw"
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(doc), encoding="utf-8")
    base = read_results(DATA / "deepeval" / "deepeval_baseline.json")
    with pytest.raises(ResultsError, match="is not the same task"):
        compare_runs(base, [read_results(changed)], CompareSettings())


def test_a_metric_outside_0_1_in_a_tools_file_names_a_way_on_that_works_on_that_file(tmp_path: Path) -> None:
    """An lm-eval metric of 7 (a 0-10 rubric) was refused with "rescale the scores to [0, 1]
    first": a samples file cannot be rescaled in place, and compare has no option for it."""
    rows = [
        json.loads(line)
        for line in (DATA / "lm_eval" / "samples_arith_mc_sloppy.jsonl").read_text().splitlines()
    ]
    rows[0]["acc"] = 7
    scaled = tmp_path / "samples_arith_mc_rubric.jsonl"
    scaled.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(ResultsError) as caught:
        read_results(scaled)
    said = str(caught.value)
    assert said.startswith(f"{scaled}:1: reward 7 is outside [0, 1]; name a score in [0, 1] with --scorer")
    assert "export the file as a CSV of task_id, trial, reward with the scores rescaled" in said
