"""The sign test on net preferences that ``gate_mode: pairwise`` decides by: against brute-force
enumeration, its symmetries, the net of a task's judgements; and ``capevolve compare
--pairwise``, gone, refused naming the session's pairwise gate."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._cli.main import main
from pytest_capevolve._stats.pairwise import net_preference, sign_test

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
    assert sign_test([-n for n in nets]).p_greater == pytest.approx(float(less), rel=1e-9, abs=1e-12)
    assert test.ties == sum(n == 0 for n in nets)
    assert test.wins_b + test.wins_a + test.ties == len(nets)


@given(nets_strategy, st.integers(0, 5), st.integers(1, 4))
def test_swapping_a_and_b_mirrors_the_counts_and_ties_and_magnitudes_change_nothing(
    nets: list[int], zeros: int, scale: int
) -> None:
    test = sign_test(nets)
    mirrored = sign_test([-n for n in nets])
    assert (mirrored.wins_b, mirrored.wins_a, mirrored.ties) == (test.wins_a, test.wins_b, test.ties)
    padded = sign_test([n * scale for n in nets] + [0] * zeros)
    assert padded.p_greater == pytest.approx(test.p_greater) and padded.ties == test.ties + zeros


def test_net_preferences_count_b_minus_a() -> None:
    assert net_preference(["B", "tie", "B", "A"]) == 1
    with pytest.raises(ValueError, match="not one of A, B, tie"):
        net_preference(["b"])


def test_compare_pairwise_is_refused_naming_the_sessions_pairwise_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefs = tmp_path / "prefs.csv"
    prefs.write_text("task_id,preference\nq1,B\n", encoding="utf-8")
    with pytest.raises(SystemExit) as refused:
        main(["compare", "--pairwise", str(prefs)])
    assert refused.value.code == 2
    assert "--pairwise was dropped; to gate on a judge's preferences, set gate_mode: pairwise" in (
        capsys.readouterr().err
    )
    assert main(["compare", str(prefs), str(prefs)]) == 4  # two tables of preferences: the same way on
    assert "gate_mode: pairwise in capevolve.yaml" in capsys.readouterr().err
