"""Clusters: the exact test flips whole clusters (brute force agrees), is calibrated where
tasks of a cluster move together (flipping tasks one by one is not), and compare reads clusters
from a column or a file."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._imported.compare import CompareSettings, compare_files, compare_runs
from pytest_capevolve._imported.results import ImportedRun, Outcome, ResultsError
from pytest_capevolve._stats.arms import sign_flip_test
from pytest_capevolve._stats.clusters import cluster_mean_ci, cluster_sign_flip_test

ALPHA = 0.05


def brute_force_cluster_p(cand: np.ndarray, best: np.ndarray, clusters: list[str]) -> Fraction:
    """P(Σ_c s_c·D_c ≥ Σ_c D_c) over every sign pattern of the clusters, in fractions."""
    sums: dict[str, Fraction] = {}
    for row_c, row_b, cluster in zip(cand, best, clusters, strict=True):
        d = Fraction(sum(map(Fraction, row_c)), len(row_c)) - Fraction(sum(map(Fraction, row_b)), len(row_b))
        sums[cluster] = sums.get(cluster, Fraction(0)) + d
    values = list(sums.values())
    observed = sum(values, Fraction(0))
    hits = sum(
        sum((s * v for s, v in zip(signs, values, strict=True)), Fraction(0)) >= observed
        for signs in itertools.product((1, -1), repeat=len(values))
    )
    return Fraction(hits, 2 ** len(values))


reward = st.sampled_from([0.0, 0.5, 1.0])


@given(
    st.integers(2, 12).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(reward, min_size=2, max_size=2), min_size=n, max_size=n),
            st.lists(st.lists(reward, min_size=2, max_size=2), min_size=n, max_size=n),
            st.lists(st.sampled_from("abcdefg"), min_size=n, max_size=n),
        )
    )
)
def test_the_cluster_p_value_is_the_brute_force_enumeration_of_cluster_flips(arms) -> None:
    cand, best, clusters = (np.array(arms[0]), np.array(arms[1]), list(arms[2]))
    result = cluster_sign_flip_test(cand, best, clusters, alpha=ALPHA)
    assert result.method == "exact"
    assert result.fraction == brute_force_cluster_p(cand, best, clusters)


def test_every_task_its_own_cluster_is_the_plain_test() -> None:
    rng = np.random.default_rng(3)
    cand, best = rng.integers(0, 2, (15, 3)).astype(float), rng.integers(0, 2, (15, 3)).astype(float)
    own = cluster_sign_flip_test(cand, best, [f"t{i}" for i in range(15)])
    assert own.fraction == sign_flip_test(cand, best).fraction


def test_the_cluster_interval_is_wider_when_a_cluster_moves_together() -> None:
    deltas = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5])
    se_clustered, ci = cluster_mean_ci(deltas, ["a"] * 3 + ["b"] * 3 + ["c"] * 3)
    se_own, _ = cluster_mean_ci(deltas, [str(i) for i in range(9)])
    assert ci is not None and se_clustered is not None and se_own is not None
    assert se_clustered > se_own and ci[0] < 0.5 < ci[1]
    assert cluster_mean_ci(deltas, ["a"] * 9) == (None, None)  # one cluster: no interval


def run_of(rows: list[tuple[str, float]], label: str, cluster: dict[str, str] | None = None) -> ImportedRun:
    outcomes = tuple(Outcome(t, "1", r, cluster=(cluster or {}).get(t)) for t, r in rows)
    return ImportedRun(Path(label), "csv", label, outcomes)


def test_compare_flips_the_clusters_a_column_gives(tmp_path: Path) -> None:
    # eight tasks improved, but they are two sources of four: two clusters, p = 1/4
    tasks = [f"t{i}" for i in range(8)]
    clusters = {t: ("x" if i < 4 else "y") for i, t in enumerate(tasks)}
    base = run_of([(t, 0.0) for t in tasks], "A", clusters)
    cand = run_of([(t, 1.0) for t in tasks], "B", clusters)
    [result] = compare_runs(base, [cand], CompareSettings()).pairs
    assert result.verdict.p_exact == "1/4" and result.verdict.decision == "reject"
    assert "flipping 2 clusters of 8 tasks" in result.verdict.reason
    assert result.verdict.ci_method == "cluster_t"
    [alone] = compare_runs(run_of([(t, 0.0) for t in tasks], "A"), [run_of([(t, 1.0) for t in tasks], "B")],
                           CompareSettings()).pairs  # fmt: skip
    assert alone.verdict.p_exact == "1/256" and alone.verdict.decision == "accept"
    promises = compare_runs(base, [cand], CompareSettings()).promises()
    assert any("2 clusters" in line for line in promises["hold"])
    # the same from a CSV's cluster column, and from --clusters FILE
    rows = "".join(f"{t},1,{{r}},{clusters[t]}\n" for t in tasks)
    (tmp_path / "a.csv").write_text("task_id,trial,reward,cluster\n" + rows.format(r=0), encoding="utf-8")
    (tmp_path / "b.csv").write_text("task_id,trial,reward,cluster\n" + rows.format(r=1), encoding="utf-8")
    [from_column] = compare_files([tmp_path / "a.csv", tmp_path / "b.csv"], CompareSettings()).pairs
    assert from_column.verdict.p_exact == "1/4"
    (tmp_path / "plain_a.csv").write_text(
        "task_id,reward\n" + "".join(f"{t},0\n" for t in tasks), encoding="utf-8"
    )
    (tmp_path / "plain_b.csv").write_text(
        "task_id,reward\n" + "".join(f"{t},1\n" for t in tasks), encoding="utf-8"
    )
    (tmp_path / "map.csv").write_text(
        "task_id,cluster\n" + "".join(f"{t},{c}\n" for t, c in clusters.items())
    )
    paths = [tmp_path / "plain_a.csv", tmp_path / "plain_b.csv"]
    [from_file] = compare_files(paths, CompareSettings(), clusters=tmp_path / "map.csv").pairs
    assert from_file.verdict.p_exact == "1/4"


def test_clusters_given_for_some_tasks_only_are_refused_with_a_way_on(tmp_path: Path) -> None:
    base = run_of([("t1", 0.0), ("t2", 0.0)], "A", {"t1": "x"})
    cand = run_of([("t1", 1.0), ("t2", 1.0)], "B", {"t1": "x"})
    with pytest.raises(ResultsError, match="'t2' has no cluster.*--clusters FILE"):
        compare_runs(base, [cand], CompareSettings())
    moved = run_of([("t1", 1.0), ("t2", 1.0)], "C", {"t1": "y", "t2": "y"})
    with pytest.raises(ResultsError, match="one cluster in every run"):
        compare_runs(
            run_of([("t1", 0.0), ("t2", 0.0)], "A", {"t1": "x", "t2": "x"}), [moved], CompareSettings()
        )
    (tmp_path / "map.csv").write_text("task_id,cluster\nt1,x\n", encoding="utf-8")
    (tmp_path / "a.csv").write_text("task_id,reward\nt1,0\nt2,0\n", encoding="utf-8")
    # the way on is a line to write, not a riddle ("a task alone is a cluster of its own")
    with pytest.raises(ResultsError, match="no cluster for task 't2'.*a cluster of its own \\(`t2,t2`\\)"):
        compare_files(
            [tmp_path / "a.csv", tmp_path / "a.csv"], CompareSettings(), clusters=tmp_path / "map.csv"
        )
