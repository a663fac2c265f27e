"""Attacks on ``capevolve compare`` inputs (issue 41's readers), landed this session.

Missing data is never a 0, and a candidate whose errored trials could flip the decision is
indecisive (worst-case imputation). A candidate file that simply has no rows for its losing
tasks was not weighed that way: those tasks were "in one run only", and the rest accepted.
Clusters are fixed before the results: a candidate file's own cluster column, chosen after
them, put each loss in a cluster with a win and accepted a run the tasks did not.
"""

from __future__ import annotations

import json

import pytest

from pytest_capevolve._cli.main import main


def _write(path, rows, cluster=None) -> str:
    """``rows`` (task, reward) as a results file, with a ``cluster`` column from ``cluster`` (task →
    cluster; a task it leaves out is its own) if given."""
    column = "" if cluster is None else ",cluster"
    cells = {} if cluster is None else {t: f",{cluster.get(t, t)}" for t, _ in rows}
    path.write_text(
        f"task_id,trial,reward{column}\n" + "".join(f"{t},0,{r}{cells.get(t, '')}\n" for t, r in rows)
    )
    return str(path)


@pytest.mark.attack(
    "inputs",
    attack=(
        "`capevolve compare A.csv B.csv` where B's file has no rows for the 10 tasks B lost (a no-op: "
        "10 better, 10 worse, 40 equal of 60; coverage 83 %): ACCEPT, p = 1/1024, where the same rows "
        "errored were indecisive"
    ),
    outcome=(
        "prevented: a trial one run measured and the other has no row for is missing data like an "
        "errored one, so worst-case imputation weighs it (indecisive, exit 11; the summary says "
        "`missing (no row in one file): …`, and the reason says they are rows the file lacks)"
    ),
)
def test_a_candidate_file_without_its_losing_tasks_is_not_accepted(tmp_path, capsys) -> None:
    # a no-op: equal on 40 tasks, better on 10, worse on 10 (mean delta 0)
    base = [(f"t{i}", 1 if 50 <= i < 60 else (0 if 40 <= i < 50 else i % 2)) for i in range(60)]
    cand = [(t, 1 - r if 40 <= int(t[1:]) < 60 else r) for t, r in base]
    kept = [(t, r) for t, r in cand if not 50 <= int(t[1:]) < 60]  # its 10 losses left out: 83 % coverage
    honest = main(["compare", _write(tmp_path / "a.csv", base), _write(tmp_path / "all.csv", cand), "--json"])
    assert honest != 0 and json.loads(capsys.readouterr().out)["comparisons"][0]["decision"] == "reject"
    code = main(["compare", _write(tmp_path / "a.csv", base), _write(tmp_path / "b.csv", kept), "--json"])
    [verdict] = json.loads(capsys.readouterr().out)["comparisons"]
    assert code != 0 and verdict["decision"] == "indecisive", verdict["reason"]
    assert "worst-case imputation of the missing trials" in verdict["reason"]
    assert "the candidate's 10 are rows one file lacks, not errors" in verdict["reason"]


# 60 tasks: 13 the candidate wins, 8 it loses, 39 equal: p = 0.19 task by task, a reject
BASE = [(f"t{i}", 0 if i < 13 else (1 if i < 21 else i % 2)) for i in range(60)]
CAND = [(t, 1 - r if int(t[1:]) < 21 else r) for t, r in BASE]


@pytest.mark.attack(
    "inputs",
    attack=(
        "`capevolve compare A.csv B.csv` where B's file alone has a `cluster` column, chosen after the "
        "results: each of its 8 losses in a cluster with one of its 13 wins (net 0), 5 wins alone; "
        "task by task p = 0.19 (reject), by those 52 clusters ACCEPT, p = 1/32"
    ),
    outcome=(
        "refused (exit 4): a candidate's cluster for a task the baseline's file leaves unclustered is "
        "not read, naming the way on (the column in the baseline's file too, or `--clusters FILE` for "
        "both)"
    ),
)
def test_a_candidate_file_that_clusters_each_loss_with_a_win_is_not_accepted(tmp_path, capsys) -> None:
    # clusters chosen after the results: loss t13+k with win tk (net 0), five wins left alone
    cluster = {f"t{k}": f"c{k}" for k in range(8)} | {f"t{13 + k}": f"c{k}" for k in range(8)}
    a = _write(tmp_path / "a.csv", BASE)
    plain = main(["compare", a, _write(tmp_path / "plain.csv", CAND), "--json"])
    assert plain == 10 and json.loads(capsys.readouterr().out)["comparisons"][0]["decision"] == "reject"
    b = _write(tmp_path / "b.csv", CAND, cluster)
    code = main(["compare", a, b, "--json"])  # was: ACCEPT, 52 clusters, p = 1/32
    said = capsys.readouterr()
    assert code == 4 and "accept" not in said.out.lower(), said.out
    assert "in none in the baseline's file" in said.err and "--clusters FILE" in said.err, said.err


@pytest.mark.attack(
    "inputs",
    attack=(
        "`capevolve compare A.csv B.csv` where B's file alone has a `cluster` column, chosen after the "
        "results: each of its 8 losses in a cluster with one of its 13 wins (net 0), 5 wins alone; "
        "task by task p = 0.19 (reject), by those 52 clusters ACCEPT, p = 1/32"
    ),
    note="the way on: clusters both files share are read",
)
@pytest.mark.parametrize("where", ["both", "flag"])
def test_clusters_fixed_with_the_baseline_are_still_flipped_whole(tmp_path, capsys, where) -> None:
    """The way on the refusal names works: the same clusters in the baseline's file too, or for
    both runs with --clusters FILE, are read (and this run is then not better: p = 1/2)."""
    cluster = {f"t{i}": "x" if i < 30 else "y" for i in range(60)}
    in_files = cluster if where == "both" else None
    files = [_write(tmp_path / "a.csv", BASE, in_files), _write(tmp_path / "b.csv", CAND, in_files)]
    extra = []
    if where == "flag":
        (tmp_path / "map.csv").write_text(
            "task_id,cluster\n" + "".join(f"{t},{c}\n" for t, c in cluster.items())
        )
        extra = ["--clusters", str(tmp_path / "map.csv")]
    main(["compare", *files, *extra, "--json"])
    [verdict] = json.loads(capsys.readouterr().out)["comparisons"]
    assert "flipping 2 clusters of 60 tasks" in verdict["reason"], verdict["reason"]
