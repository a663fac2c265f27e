"""``capevolve compare --pairwise``'s pure parts: the sign test on net preferences against
brute-force enumeration, its symmetries, the preferences table's reader and its refusals, and
the command's exit codes (run in this process: no session is started)."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._cli.main import main
from pytest_capevolve._imported.pairwise import compare_pairwise, looks_pairwise, read_judgements
from pytest_capevolve._imported.results import ResultsError
from pytest_capevolve._stats.pairwise import net_preference, sign_test, unit_nets

nets_strategy = st.lists(st.integers(-3, 3), min_size=0, max_size=12)


def brute_force_p(nets: list[int]) -> tuple[Fraction, Fraction]:
    """P(#positive ≥ observed) and P(#positive ≤ observed) over every sign pattern of the
    non-zero nets, each pattern equally likely: the sign test's null, enumerated."""
    signs = [n > 0 for n in nets if n != 0]
    observed = sum(signs)
    patterns = list(itertools.product((False, True), repeat=len(signs)))
    above = sum(sum(p) >= observed for p in patterns)
    below = sum(sum(p) <= observed for p in patterns)
    return Fraction(above, len(patterns)), Fraction(below, len(patterns))


@given(nets_strategy)
def test_the_sign_test_is_the_brute_force_enumeration_of_signs(nets: list[int]) -> None:
    test = sign_test(nets)
    greater, less = brute_force_p(nets)
    assert test.p_greater == pytest.approx(float(greater), rel=1e-9, abs=1e-12)
    assert test.p_less == pytest.approx(float(less), rel=1e-9, abs=1e-12)
    assert test.ties == sum(n == 0 for n in nets)
    assert test.wins_b + test.wins_a + test.ties == len(nets)


@given(nets_strategy, st.integers(0, 5), st.integers(1, 4))
def test_swapping_a_and_b_mirrors_p_and_ties_and_magnitudes_change_nothing(
    nets: list[int], zeros: int, scale: int
) -> None:
    test = sign_test(nets)
    mirrored = sign_test([-n for n in nets])
    assert (mirrored.p_greater, mirrored.p_less) == pytest.approx((test.p_less, test.p_greater))
    assert mirrored.p_two_sided == pytest.approx(test.p_two_sided)
    padded = sign_test([n * scale for n in nets] + [0] * zeros)
    assert padded.p_greater == pytest.approx(test.p_greater) and padded.ties == test.ties + zeros
    if test.ci is not None:  # B's win rate lies in its interval
        assert test.ci[0] <= test.wins_b / test.decisive <= test.ci[1]


def test_net_preferences_count_b_minus_a_and_clusters_sum_their_tasks() -> None:
    assert net_preference(["B", "tie", "B", "A"]) == 1
    with pytest.raises(ValueError, match="not one of A, B, tie"):
        net_preference(["b"])
    nets = {"t1": 1, "t2": -2, "t3": 2, "t4": 0}
    assert unit_nets(nets) == [1, -2, 2, 0]
    assert unit_nets(nets, {"t1": "x", "t2": "x", "t3": "y"}) == [-1, 2, 0]  # t4: its own unit


def write(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_a_table_reads_a_b_tie_in_any_case_and_a_failed_judgement_is_missing_not_a_tie(
    tmp_path: Path,
) -> None:
    prefs = write(
        tmp_path / "prefs.csv",
        "task_id,trial,winner,error",
        ["q1,1,b,", "q1,2,Tie,", "q2,1,A,", "q2,2,,", "q3,1,B,timeout", "q4,1,,"],
    )
    assert looks_pairwise(prefs)
    result = compare_pairwise(prefs, min_coverage=0.5)
    assert result.counts == {"A": 1, "B": 1, "tie": 1, "errored": 3}
    assert result.task_nets == {"q1": 1, "q2": -1}  # q3, q4: no judgement that did not fail
    assert result.coverage == 0.5 and result.decision == "reject"
    assert compare_pairwise(prefs, min_coverage=0.8).decision == "indecisive"


def test_clusters_are_the_units_of_the_test(tmp_path: Path) -> None:
    rows = [f"q{t},c{t // 4},B" for t in range(8)]  # eight wins from two sources: two pieces of evidence
    prefs = write(tmp_path / "prefs.csv", "task_id,cluster,preference", rows)
    by_cluster = compare_pairwise(prefs)
    assert (by_cluster.by, by_cluster.test.wins_b) == ("cluster", 2)
    assert by_cluster.test.p_greater == 0.25 and by_cluster.decision == "reject"
    plain = write(tmp_path / "plain.csv", "task_id,preference", [r.split(",", 2)[0] + ",B" for r in rows])
    assert compare_pairwise(plain).decision == "accept"  # 1/256 when taken as independent
    from_file = compare_pairwise(plain, clusters={f"q{t}": f"c{t // 4}" for t in range(8)})
    assert from_file.by == "cluster" and from_file.test.p_greater == 0.25


@pytest.mark.parametrize(
    ("header", "rows", "words"),
    [
        ("task_id,preference", ["q1,C"], "is not A, B or tie; write A"),
        ("task_id,order,preference", ["q1,AB,A", "q1,XY,B"], "is not AB or BA"),
        ("task_id,order,preference", ["q1,AB,A", "q1,BA,B", "q2,AB,B"], "judged in one order only ('q2')"),
        (
            "task_id,order,preference",
            ["q1,AB,A", "q1,BA,B", "q1,BA,B", "q2,AB,B", "q2,BA,A"],
            "judged more often in one order ('q1'); a judge's lean",
        ),
        # the way on: drop the column only for a random order, never for a fixed one (it said
        # "if the order was not chosen per judgement, drop the order column": the fixed case)
        (
            "task_id,order,preference",
            ["q1,AB,A", "q1,BA,B", "q2,AB,B"],
            "only where the order shown was drawn at random",
        ),
        ("task_id,trial,preference", ["q1,1,A", "q1,1,B"], "trial '1' twice"),
        (
            "task_id,trial,order,preference",
            ["q1,1,AB,A", "q1,1,BA,B", "q1,1,AB,B", "q1,2,BA,A"],
            "trial '1' twice in order AB",
        ),
        ("task_id,reward", ["q1,1"], "the columns task_id and preference"),
        ("task_id,preference", [",A"], "no task id"),
        ("task_id,cluster,preference", ["q1,x,A", "q1,y,B"], "is in two clusters ('x', 'y')"),
    ],
)
def test_a_table_this_test_cannot_read_is_refused_with_a_way_on(
    tmp_path: Path, header: str, rows: list[str], words: str
) -> None:
    with pytest.raises(ResultsError, match=r"prefs\.csv") as refused:
        read_judgements(write(tmp_path / "prefs.csv", header, rows))
    assert words in str(refused.value)


def test_a_task_judged_in_both_orders_reports_the_lean_to_the_first_output(tmp_path: Path) -> None:
    rows = [f"q{t},AB,A" for t in range(10)] + [f"q{t},BA,B" for t in range(10)]
    prefs = write(tmp_path / "prefs.csv", "task_id,order,preference", rows)
    result = compare_pairwise(prefs)
    assert result.position == {"first_won": 20, "decisive": 20}  # a judge that always picks the first
    assert result.test.ties == 10 and result.decision == "reject"  # ... cancels: no preference


def test_a_trial_judged_once_in_each_order_is_read_with_a_trial_column(tmp_path: Path) -> None:
    """Each trial judged both ways, the natural layout, was refused as "trial twice"."""
    rows = [f"q{t},{k},{o},B" for t in range(8) for k in (1, 2) for o in ("AB", "BA")]
    result = compare_pairwise(write(tmp_path / "prefs.csv", "task_id,trial,order,preference", rows))
    assert result.counts["B"] == 32 and result.test.wins_b == 8 and result.decision == "accept"


def test_the_command_exits_as_a_gate_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    better = tmp_path / "better.jsonl"
    better.write_text("".join(json.dumps({"task_id": f"q{t}", "preference": "B"}) + "\n" for t in range(8)))
    assert main(["compare", str(better), "--json"]) == 0  # detected by its column
    answer = json.loads(capsys.readouterr().out)
    assert answer["decision"] == "accept" and answer["p_value"] == pytest.approx(1 / 256)
    worse = write(tmp_path / "worse.csv", "task_id,preference", [f"q{t},A" for t in range(8)])
    markdown = tmp_path / "summary.md"
    assert main(["compare", "--pairwise", str(worse), "--markdown", str(markdown)]) == 10
    assert "A preferred to B" in markdown.read_text() and "### What does not" in markdown.read_text()
    capsys.readouterr()
    bad = write(tmp_path / "bad.csv", "task_id,preference", ["q1,maybe"])
    assert main(["compare", "--pairwise", str(bad)]) == 4
    assert "is not A, B or tie" in capsys.readouterr().err
    assert main(["compare", "--pairwise", str(worse), str(worse)]) == 4
    assert "one file of preferences" in capsys.readouterr().err
    assert main(["compare", "--pairwise", str(worse), "--scorer", "acc"]) == 4
    assert "--scorer: for files of rewards" in capsys.readouterr().err
    rewards = write(tmp_path / "rewards.csv", "task_id,reward", ["q1,1"])
    assert not looks_pairwise(rewards)  # one file of rewards is not taken for preferences
    assert main(["compare", str(rewards)]) == 4
    assert "compare needs two runs or more" in capsys.readouterr().err


@pytest.mark.parametrize("question", [["--margin", "-0.05"], ["--equivalence", "0.1"], ["--margin", "0"]])
def test_a_margin_on_preferences_is_refused_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], question: list[str]
) -> None:
    # a user asking "no worse than" of a judge's preferences got the superiority answer, exit 0
    prefs = write(tmp_path / "prefs.csv", "task_id,preference", [f"q{t},B" for t in range(8)])
    assert main(["compare", str(prefs), *question]) == 4
    err = capsys.readouterr().err
    assert f"{question[0]}: the pairwise sign test asks only whether B is preferred" in err
    assert "compare two files of rewards" in err
