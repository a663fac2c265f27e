"""``capevolve compare``'s pure parts: the CSV / JSONL readers, the pairing of two runs, and
the decision — whose p-value is the exact sign-flip enumeration, Holm across several runs."""

from __future__ import annotations

import itertools
import json
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._decide.rounds import family_levels
from pytest_capevolve._imported.compare import CompareSettings, compare_runs
from pytest_capevolve._imported.pairing import COMMON, DIFFER, NOT_SHOWN, pair
from pytest_capevolve._imported.readers import ReadOptions, read_results
from pytest_capevolve._imported.results import ImportedRun, Outcome, ResultsError


def run_of(
    rewards: dict[str, list[float | None]], label: str = "run", seed: str | None = None
) -> ImportedRun:
    outcomes = tuple(
        Outcome(task, str(k + 1), r, None if r is not None else "boom", seed)
        for task, trials in rewards.items()
        for k, r in enumerate(trials)
    )
    return ImportedRun(Path(f"{label}.csv"), "csv", label, outcomes)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- readers ---------------------------------------------------------------------------------


def test_a_csv_reads_task_trial_reward_with_an_empty_cell_and_an_error_as_missing(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.csv",
        "Task_ID,epoch,score,error,seed\nt1,1,1,,7\nt1,2,0.5,,7\nt2,1,,,7\nt2,2,1,timeout,7\n",
    )
    run = read_results(path)
    assert run.source == "csv" and run.label == "a.csv" and run.task_ids == ["t1", "t2"]
    assert [(o.task_id, o.trial, o.reward, o.seed) for o in run.outcomes] == [
        ("t1", "1", 1.0, "7"),
        ("t1", "2", 0.5, "7"),
        ("t2", "1", None, "7"),
        ("t2", "2", None, "7"),
    ]
    assert run.infra_errors == 2 and run.outcomes[3].error == "timeout"


def test_scorer_names_a_tables_reward_column_and_a_file_without_it_is_refused(tmp_path: Path) -> None:
    # `--scorer passed` on a CSV with a `passed` column was ignored: "no reward column (reward)"
    path = write(tmp_path / "a.csv", "task_id,reward,passed\nt1,0,1\nt2,0,0.5\n")
    run = read_results(path, options=ReadOptions(scorer="Passed"))
    assert [o.reward for o in run.outcomes] == [1.0, 0.5]
    assert [o.reward for o in read_results(path).outcomes] == [0.0, 0.0]  # default: `reward`
    lines = write(tmp_path / "b.jsonl", json.dumps({"task_id": "t1", "passed": 1}) + "\n")
    assert [o.reward for o in read_results(lines, options=ReadOptions(scorer="passed")).outcomes] == [1.0]
    with pytest.raises(ResultsError, match="no column 'nope' \\(--scorer\\).*or drop --scorer"):
        read_results(path, options=ReadOptions(scorer="nope"))


def test_jsonl_reads_the_same_and_a_table_without_trials_numbers_nothing(tmp_path: Path) -> None:
    path = write(
        tmp_path / "b.jsonl",
        "\n".join(json.dumps(r) for r in [{"task": "t1", "reward": True}, {"task": "t1", "reward": 0}])
        + "\n",
    )
    run = read_results(path, options=ReadOptions(label="B"))
    assert run.label == "B" and [(o.trial, o.reward) for o in run.outcomes] == [(None, 1.0), (None, 0.0)]
    assert any("file order" in note for note in run.notes)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("task_id,trial,reward\nt1,1,1.5\n", "outside [0, 1]"),
        ("task_id,trial,reward\nt1,1,nan\n", "outside [0, 1]"),
        ("task_id,trial,reward\nt1,1,yes\n", "not a number"),
        (
            "task_id,trial,reward\nt1,1,1\nt1,1,0\n",
            "bad.csv:3: task 't1' has trial '1' twice (first on line 2)",
        ),
        ("name,reward\nt1,1\n", "no task id column"),
        ("task_id,value\nt1,1\n", "no reward column"),
        ("task_id,preference\nt1,B\n", "gated in a session: gate_mode: pairwise"),
        ("task_id,trial,reward\n", "no results found"),
        ("task_id,trial,reward\n,1,1\n", "no task id"),
        # a row whose cells do not match the header (an unquoted comma in a task id shifts its
        # reward into another column) was read as it fell: t1's trial 0 reward '1', 'extra' dropped
        ("task_id,trial,reward\nt1,0,1,extra\n", "bad.csv:2: 4 cells where the header has 3"),
        ("task_id,trial,reward\nt1,0\n", "bad.csv:2: 2 cells where the header has 3"),
        # a spreadsheet saved with its locale's separator: one column, named 'task_id;trial;reward'
        ("task_id;trial;reward\nt1;0;1\n", "separated by ';', not commas: save it comma-separated"),
        # the line named is the file's, past a blank line (it named line 3)
        ("task_id,trial,reward\nt1,0,1\n\nt2,0,7\n", "bad.csv:4: reward '7' is outside"),
    ],
)
def test_a_bad_table_is_refused_naming_the_file_and_a_way_on(tmp_path: Path, text: str, words: str) -> None:
    path = write(tmp_path / "bad.csv", text)
    with pytest.raises(ResultsError, match="bad.csv") as caught:
        read_results(path)
    assert words in str(caught.value)


def test_a_table_saved_with_a_byte_order_mark_reads_as_without(tmp_path: Path) -> None:
    """Excel's "CSV UTF-8" starts the file with a BOM: its first column was '\\ufefftask_id', and
    the file was refused for having no task_id column."""
    path = tmp_path / "excel.csv"
    path.write_bytes("task_id,trial,reward\nt1,0,1\n".encode("utf-8-sig"))
    assert [(o.task_id, o.reward) for o in read_results(path).outcomes] == [("t1", 1.0)]
    lines = tmp_path / "b.jsonl"
    lines.write_bytes('{"task_id": "t1", "reward": 0.5}\n'.encode("utf-8-sig"))
    assert [o.reward for o in read_results(lines).outcomes] == [0.5]


def test_an_unknown_file_is_refused_naming_the_formats(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="--format") as caught:
        read_results(write(tmp_path / "x.txt", "hello"))
    assert "csv" in str(caught.value) and "inspect" in str(caught.value)
    with pytest.raises(ResultsError, match="no such results file"):
        read_results(tmp_path / "absent.csv")
    # inspect's --log-dir is a folder: named as one, with the log in it to give instead
    logs = tmp_path / "logs"
    logs.mkdir()
    log = write(logs / "2026-12-04T17-10-08_greet_37cu.eval", "x")
    write(logs / "notes.md", "x")
    with pytest.raises(ResultsError, match="is a folder") as caught:
        read_results(logs)
    assert str(log) in str(caught.value) and "notes.md" not in str(caught.value)
    # a capevolve run dir is judged in its run, not compared: said, with the commands that do
    run = tmp_path / "run"
    run.mkdir()
    for name in ("events.jsonl", "state.json", "LEDGER.md"):
        write(run / name, "{}")
    with pytest.raises(ResultsError, match="is a capevolve run") as caught:
        read_results(run)
    assert "capevolve gate TAG" in str(caught.value)
    # --format reads a file whatever its suffix
    assert read_results(write(tmp_path / "y.txt", "task_id,reward\nt,1\n"), format="csv").task_ids == ["t"]


# --- pairing ---------------------------------------------------------------------------------


def test_pairing_aligns_trials_by_label_keeps_missing_missing_and_reports_one_sided_tasks() -> None:
    base = run_of({"a": [1, 0], "b": [1, 1], "gone": [0, 0]}, "A", seed="7")
    cand = run_of({"b": [1, None], "a": [0, 1], "new": [1, 1]}, "B", seed="7")
    p = pair(base, cand)
    assert p.task_ids == ["a", "b", "gone", "new"] and p.trials_by == "label"
    assert np.array_equal(p.baseline, [[1, 0], [1, 1], [0, 0], [np.nan, np.nan]], equal_nan=True)
    assert np.array_equal(p.candidate, [[0, 1], [1, np.nan], [np.nan, np.nan], [1, 1]], equal_nan=True)
    # missing data: B's errored trial of b and the two of "gone" it has no row for; A's of "new"
    assert p.infra_errors == {"candidate": 3, "best": 2}
    assert p.only_in_baseline == ["gone"] and p.only_in_candidate == ["new"]
    assert p.one_sided_trials == 1  # b's second trial, errored in B
    assert p.seeds == COMMON


def test_seeds_are_common_only_where_both_files_show_the_same_seed() -> None:
    rewards = {"a": [1.0], "b": [0.0]}
    assert pair(run_of(rewards, seed="1"), run_of(rewards, seed="2")).seeds == DIFFER
    assert pair(run_of(rewards, seed="1"), run_of(rewards)).seeds == NOT_SHOWN
    assert pair(run_of(rewards), run_of(rewards)).seeds == NOT_SHOWN


def test_unlabelled_trials_pair_by_position() -> None:
    base = ImportedRun(Path("a"), "csv", "A", (Outcome("t", None, 1.0), Outcome("t", None, 0.0)))
    cand = run_of({"t": [0.0, 0.0, 1.0]})
    p = pair(base, cand)
    assert p.trials_by == "position" and p.baseline.shape == (1, 3)
    assert np.array_equal(p.baseline, [[1, 0, np.nan]], equal_nan=True)


# --- the decision ----------------------------------------------------------------------------


def brute_force_p(deltas: list[Fraction]) -> Fraction:
    """P(Σ s·d ≥ Σ d) over all 2^n fair sign patterns, by enumeration."""
    observed = sum(deltas, Fraction(0))
    hits = sum(
        sum((s * d for s, d in zip(signs, deltas, strict=True)), Fraction(0)) >= observed
        for signs in itertools.product((1, -1), repeat=len(deltas))
    )
    return Fraction(hits, 2 ** len(deltas))


reward = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])


@given(
    st.integers(1, 9).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(reward, min_size=1, max_size=3), min_size=n, max_size=n),
            st.lists(st.lists(reward, min_size=1, max_size=3), min_size=n, max_size=n),
        )
    )
)
def test_the_compare_p_value_is_the_brute_force_enumeration_of_sign_flips(arms) -> None:
    base_rows, cand_rows = arms
    base = run_of({f"t{i}": list(r) for i, r in enumerate(base_rows)}, "A")
    cand = run_of({f"t{i}": list(r) for i, r in enumerate(cand_rows)}, "B")
    [result] = compare_runs(base, [cand], CompareSettings(min_coverage=0.0)).pairs
    deltas = [
        sum(map(Fraction, c), Fraction(0)) / len(c) - sum(map(Fraction, b), Fraction(0)) / len(b)
        for b, c in zip(base_rows, cand_rows, strict=True)
    ]
    expected = brute_force_p(deltas)
    assert Fraction(result.verdict.p_exact) == expected
    decided = "accept" if expected <= Fraction(1, 20) else "reject"
    # trials one run has and the other has no row for are missing data: worst-case imputation
    # may leave the decision indecisive, never turn it
    uneven = any(len(b) != len(c) for b, c in zip(base_rows, cand_rows, strict=True))
    assert result.verdict.decision in ((decided, "indecisive") if uneven else (decided,))


def test_several_runs_share_alpha_by_holm_and_the_exit_words_follow() -> None:
    tasks = [f"t{i}" for i in range(8)]
    base = run_of({t: [0.0, 0.0] for t in tasks}, "A")
    strong = run_of({t: [1.0, 1.0] for t in tasks}, "strong")  # p = 1/256
    weaker = run_of({t: [1.0, 1.0] if i < 5 else [0.0, 0.0] for i, t in enumerate(tasks)}, "weak")  # p = 1/32
    comparison = compare_runs(base, [strong, weaker], CompareSettings())
    by = {p.candidate.label: p for p in comparison.pairs}
    assert Fraction(by["strong"].verdict.p_exact) == Fraction(1, 256)
    assert Fraction(by["weak"].verdict.p_exact) == Fraction(1, 32)
    # Holm: the smaller p at α/2, the next at α; both pass here
    assert (by["strong"].level, by["weak"].level) == (Fraction(1, 40), Fraction(1, 20))
    assert comparison.decisions == ["accept", "accept"]
    assert family_levels([Fraction(1, 256), Fraction(1, 32)], Fraction(1, 20), "holm") == [
        Fraction(1, 40),
        Fraction(1, 20),
    ]
    # a third, null run: Holm's α/3 for the smallest p, and "weak" (1/32 > α/2) no longer passes
    null = run_of({t: [0.0, 0.0] for t in tasks}, "null")
    three = compare_runs(base, [strong, weaker, null], CompareSettings())
    assert three.decisions == ["accept", "reject", "reject"]
    alone = compare_runs(base, [strong, weaker, null], CompareSettings(multiple="none"))
    assert alone.decisions == ["accept", "accept", "reject"]


def test_low_coverage_and_no_shared_task_are_indecisive_with_a_way_on() -> None:
    base = run_of({f"t{i}": [1.0] for i in range(10)}, "A")
    half = run_of({f"t{i}": [1.0] for i in range(5)}, "B")
    [result] = compare_runs(base, [half], CompareSettings()).pairs
    assert result.verdict.decision == "indecisive" and result.verdict.coverage["paired"] == 0.5
    assert "rows one file lacks" in result.verdict.reason and "same tasks" in result.verdict.reason
    errored = run_of({f"t{i}": [1.0 if i < 5 else None] for i in range(10)}, "E")
    [result] = compare_runs(base, [errored], CompareSettings()).pairs
    assert result.verdict.decision == "indecisive" and "could not judge" in result.verdict.reason
    assert "eval-retry" in result.verdict.reason and "--min-coverage" in result.verdict.reason
    other = run_of({"x": [1.0], "y": [0.0]}, "C")
    [result] = compare_runs(base, [other], CompareSettings()).pairs
    assert result.verdict.decision == "indecisive"
    assert "share no task id" in result.verdict.reason and "same task ids" in result.verdict.reason


def test_the_answer_says_what_holds_and_what_does_not_and_carries_bands() -> None:
    base = run_of({"a": [0.0, 0.0], "b": [1.0, 1.0]}, "A", seed="3")
    cand = run_of({"a": [1.0, 1.0], "b": [1.0, 0.0]}, "B", seed="3")
    answer = compare_runs(base, [cand], CompareSettings(min_coverage=0.0)).to_dict()
    [row] = answer["comparisons"]
    assert row["band_moves"] == {"defect→solid": 1, "solid→unstable": 1}
    assert row["pairing"]["seeds"] == COMMON and row["p_method"] == "exact"
    promises = answer["promises"]
    assert any("same seed" in line for line in promises["hold"])
    assert any("nothing is sealed" in line for line in promises["do_not_hold"])
    assert any("how the runs were chosen is unknown" in line for line in promises["do_not_hold"])
    json.dumps(answer)  # plain JSON


def test_runs_with_the_same_file_name_are_named_by_their_path() -> None:
    base = ImportedRun(Path("x/results.csv"), "csv", "results.csv", (Outcome("t", "1", 0.0),))
    cand = ImportedRun(Path("y/results.csv"), "csv", "results.csv", (Outcome("t", "1", 1.0),))
    [result] = compare_runs(base, [cand], CompareSettings()).pairs
    assert result.candidate.label == "y/results.csv"


def test_the_same_file_twice_is_told_apart() -> None:
    run = ImportedRun(Path("a.csv"), "csv", "a.csv", (Outcome("t", "1", 0.0),))
    comparison = compare_runs(run, [run, run], CompareSettings())
    assert [p.candidate.label for p in comparison.pairs] == ["a.csv (2)", "a.csv (3)"]


# --- margins (issue 41) ----------------------------------------------------------------------


def _ties_but(n: int, lost: int) -> tuple[ImportedRun, ImportedRun]:
    base = {f"t{i}": [float(i % 2)] for i in range(n)}
    cand = {f"t{i}": [0.0 if i < 2 * lost and i % 2 else float(i % 2)] for i in range(n)}
    return run_of(base, "base"), run_of(cand, "cand")


def test_a_margin_turns_a_tie_into_an_accept_and_a_loss_beyond_it_into_a_reject() -> None:
    base, same = _ties_but(300, 0)
    _, worse = _ties_but(300, 30)  # Δ̄ = −0.1
    assert compare_runs(base, [same], CompareSettings()).decisions == ["reject"]  # not better
    result = compare_runs(base, [same, worse], CompareSettings(margin=-0.05))
    assert result.decisions == ["accept", "reject"]
    first = result.to_dict()["comparisons"][0]
    assert first["margin"]["kind"] == "non_inferiority" and first["basis"] == "non_inferiority"
    assert result.pairs[0].level == Fraction(1, 40) and "Holm across 2 runs" in result.pairs[0].verdict.reason
    assert compare_runs(base, [same], CompareSettings(equivalence=0.05)).decisions == ["accept"]
    assert compare_runs(base, [worse], CompareSettings(equivalence=0.05)).decisions == ["reject"]


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (CompareSettings(margin=0.02), "lies in (-1, 0]"),
        (CompareSettings(equivalence=1.5), "lies in (0, 1)"),
        (CompareSettings(margin=-0.02, equivalence=0.05), "one question"),
    ],
)
def test_a_margin_the_test_cannot_ask_is_refused_in_words(settings: CompareSettings, words: str) -> None:
    base, same = _ties_but(10, 0)
    with pytest.raises(
        ResultsError,
        match=re.escape(words),
    ):
        compare_runs(base, [same], settings)


def test_a_margin_with_clusters_is_refused_with_the_way_on() -> None:
    base, same = _ties_but(10, 0)
    with pytest.raises(ResultsError, match="drop --clusters"):
        compare_runs(base, [same], CompareSettings(margin=-0.05), {f"t{i}": str(i // 2) for i in range(10)})


def test_a_margins_answer_does_not_send_the_user_to_the_clusters_it_refuses() -> None:
    """A new user's trap: under --margin the answer said "give their clusters (--clusters FILE)",
    and following it was refused. It now says a margin takes tasks as independent and where
    clusters can be used instead."""
    base, same = _ties_but(10, 0)
    for settings in (CompareSettings(margin=-0.05), CompareSettings(equivalence=0.05)):
        said = " ".join(compare_runs(base, [same], settings).promises()["do_not_hold"])
        assert "refused with --margin and --equivalence" in said
        assert "so the test flips whole clusters" not in said
    plain = " ".join(compare_runs(base, [same], CompareSettings()).promises()["do_not_hold"])
    assert "so the test flips whole clusters" in plain


def test_a_runs_line_says_why_its_samples_errored() -> None:
    """Two offline `inspect eval --model mockllm/model` logs (the mock fetches a tokenizer) had
    every sample errored: the answer said "20 errored" and INDECISIVE with no cause. The run's
    line now shows the first error, on one line."""
    from pytest_capevolve._show.compare import render_table

    base = run_of({"t1": [None, 1.0], "t2": [0.0]}, "base")
    cand = run_of({"t1": [1.0, 1.0], "t2": [1.0]}, "cand")
    lines = render_table(compare_runs(base, [cand], CompareSettings()))
    assert lines[0].startswith("baseline base: csv, 2 tasks, 3 outcomes, 1 errored (the first: boom)")
    assert "errored" in lines[2] and "the first" not in lines[2]  # none errored: nothing to say


def test_a_margin_no_run_could_show_on_these_tasks_says_so() -> None:
    """`compare base.csv base.csv --margin -0.02` on 40 tasks: identical runs, REJECT, p = 0.5,
    and nothing said why. The reason now says the margin is out of reach at this n, and the way on."""
    base, same = _ties_but(40, 0)
    said = compare_runs(base, [same], CompareSettings(margin=-0.02)).pairs[0].verdict.reason
    assert "cannot be shown here: give more tasks or ask a wider margin" in said
    assert compare_runs(base, [same], CompareSettings(equivalence=0.02)).decisions == ["reject"]
    assert (
        "cannot be shown here"
        in compare_runs(base, [same], CompareSettings(equivalence=0.02)).pairs[0].verdict.reason
    )
    assert compare_runs(base, [same], CompareSettings(margin=-0.1)).decisions == ["accept"]
    big, worse = _ties_but(300, 30)  # reachable at 300 tasks: a reject on the evidence, no hint
    said = compare_runs(big, [worse], CompareSettings(margin=-0.05)).pairs[0].verdict.reason
    assert "cannot be shown here" not in said


def test_seeds_not_shown_for_lack_of_paired_trials_does_not_say_a_file_records_none() -> None:
    """Both files had a seed column on every row, but no trial was valid in both (every one of the
    candidate's errored): the answer said "(a file records none)", which was false."""
    base = run_of({"a": [1.0], "b": [0.0]}, seed="7")
    errored = run_of({"a": [None], "b": [None]}, label="cand", seed="7")
    said = " ".join(compare_runs(base, [errored], CompareSettings()).promises()["do_not_hold"])
    assert "common trial seeds are not shown" in said and "a file records none" not in said


def test_a_run_with_more_trials_is_not_said_to_have_errored_and_the_way_on_is_to_run_the_same_trials() -> (
    None
):
    """`compare base.eval new.eval` with `--epochs 3` for the baseline and `--epochs 5` for the
    candidate (a +0.15 gain, p = 0.0005): INDECISIVE, "infra errors differ between the arms (0 vs
    120)" and "errored: 120 baseline" under a baseline line that says "0 errored". The rows a file
    lacks are still weighed as errors (one left out could have been left out for its reward), but
    they are said as what they are, with the way on."""
    from pytest_capevolve._show.compare import render_table

    tasks = [f"t{i}" for i in range(20)]
    base = run_of({t: [0.0, 1.0, 0.0] for t in tasks}, "base")
    cand = run_of({t: [0.0, 1.0, 1.0, 1.0, 0.0] for t in tasks}, "cand")  # 0.6 a task against 1/3
    result = compare_runs(base, [cand], CompareSettings())
    [verdict] = [p.verdict for p in result.pairs]
    assert verdict.decision == "indecisive"  # the guard stands: worst-case imputation flips it
    assert "the baseline's 40 are rows one file lacks, not errors" in verdict.reason
    assert "the baseline has 3 trials a task, the candidate 5" in verdict.reason
    assert verdict.reason.endswith("evaluate both runs on the same tasks with the same number of trials")
    facts = next(line for line in render_table(result) if line.startswith("cand: "))
    assert "errored" not in facts and "missing (no row in one file): 40 baseline, 0 candidate" in facts
    # an errored trial is still said as one, beside the rows a file lacks
    cand = run_of({t: [0.0, None, 1.0, 1.0, 0.0] for t in tasks}, "cand")
    facts = next(
        line
        for line in render_table(compare_runs(base, [cand], CompareSettings()))
        if line.startswith("cand: ")
    )
    assert (
        "errored: 0 baseline, 20 candidate" in facts and "missing (no row in one file): 40 baseline" in facts
    )


def test_a_candidate_file_without_some_tasks_says_which_rows_it_lacks() -> None:
    tasks = [f"t{i}" for i in range(20)]
    base = run_of({t: [0.0, 1.0] for t in tasks}, "base")
    # better on 8 tasks, equal on 9, and no rows for the last 3: their worst case flips the accept
    cand = run_of({t: [1.0, 1.0] if i < 8 else [0.0, 1.0] for i, t in enumerate(tasks[:17])}, "cand")
    [pairing] = [p.pairing for p in compare_runs(base, [cand], CompareSettings()).pairs]
    assert pairing.lacking == {"candidate": 6, "best": 0} and pairing.infra_errors == {
        "candidate": 6,
        "best": 0,
    }
    [verdict] = [p.verdict for p in compare_runs(base, [cand], CompareSettings()).pairs]
    assert verdict.decision == "indecisive", verdict.reason
    assert (
        "the candidate's 6 are rows one file lacks, not errors (3 tasks are in the baseline's file only)"
        in (verdict.reason)
    )


def test_a_task_id_that_names_another_task_in_the_other_file_is_refused() -> None:
    """lm-eval's doc_id is a position in the dataset, inspect numbers unnamed samples 1..N: the
    samples of gsm8k and of arc_easy (or two dataset versions) share every id, and were paired
    and given a verdict (REJECT, p = 0.42, on tasks never run twice). Where both files record what
    a task is, an id whose content differs is refused; where one does not, nothing is assumed."""

    def run(contents: dict[str, str | None], label: str) -> ImportedRun:
        outcomes = tuple(Outcome(t, "0", 1.0, content=c) for t, c in contents.items())
        return ImportedRun(Path(f"{label}.jsonl"), "lm_eval", label, outcomes)

    same = pair(run({"0": "h0", "1": "h1"}, "a"), run({"1": "h1", "0": "h0", "2": "h2"}, "b"))
    assert same.task_ids == ["0", "1", "2"]
    assert pair(run({"0": "h0", "1": None}, "a"), run({"0": None, "1": "other"}, "b")).task_ids == ["0", "1"]
    with pytest.raises(ResultsError) as caught:
        pair(run({"0": "h0", "1": "h1", "2": "h2"}, "a"), run({"0": "h0", "1": "x1", "2": "x2"}, "b"))
    said = str(caught.value)
    assert (
        said.startswith("task '1' is not the same task in a.jsonl and b.jsonl")
        and "(2 of 3 shared ids so)" in said
    )


def test_a_docs_snippet_that_reads_an_exit_code_turns_bash_e_off_first() -> None:
    """compare.md's CI snippet ran `capevolve compare … --markdown summary.md` then `code=$?`: in a
    GitHub Actions step (bash -e) a reject ended the step at the first line, and the summary the
    next line posts was never posted. ci.md's gate step has `set +e`; every snippet does now."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in sorted(docs.rglob("*.md")):
        for block in re.findall(r"```[a-z]*\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            if "code=$?" in block:
                before = block.split("code=$?")[0]
                assert "set +e" in before, f"{page.relative_to(docs)}: `code=$?` without `set +e` before it"


def test_a_run_named_with_label_still_shows_its_file() -> None:
    """`compare new.csv old.csv --label old --label new` printed "baseline old … new ACCEPT" and
    posted the same: the files' roles swapped by their names alone, with no file shown."""
    from pytest_capevolve._show.compare import render_markdown, render_table

    base = ImportedRun(Path("runs/new.csv"), "csv", "old", run_of({"t": [1.0]}).outcomes)
    cand = ImportedRun(Path("runs/old.csv"), "csv", "new", run_of({"t": [0.0]}).outcomes)
    result = compare_runs(base, [cand], CompareSettings())
    lines = render_table(result)
    assert lines[0].startswith("baseline old (runs/new.csv): csv") and lines[2].startswith(
        "candidate new (runs/old.csv)"
    )
    summary = render_markdown(result)
    assert "Baseline **old (runs/new.csv)**" in summary and "| new (runs/old.csv) | **REJECT**" in summary
    # a name the reader made from the file (promptfoo's arm) shows no path twice
    arm = ImportedRun(Path("r.json"), "promptfoo", "r.json [terse]", run_of({"t": [1.0]}).outcomes)
    assert render_table(compare_runs(arm, [cand], CompareSettings()))[0].startswith(
        "baseline r.json [terse]: "
    )


def test_common_seeds_are_said_as_seeds_recorded_not_as_outputs_shared() -> None:
    """Two inspect logs of a mock model that ignores its seed, both at --seed 0, were said to share
    "common random numbers" among what holds: a file shows the seed asked for, not that the agent
    honoured it (inspect passes it to some providers only, and none promises the same output)."""
    rewards = {"a": [1.0, 0.0], "b": [0.0, 1.0]}
    holds = compare_runs(run_of(rewards, seed="0"), [run_of(rewards, "B", seed="0")], CompareSettings())
    [said] = [line for line in holds.promises()["hold"] if "same seed" in line]
    assert said.endswith("(common random numbers, where the agent honours its seed)")
