"""The resolution of the exact gate: the smallest win it can accept at a level, from the
sign-flip test's own attainable p-values; and the level the next decision is taken at."""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._decide.verdict import Verdict
from pytest_capevolve._policy.resolution import next_level, out_of_reach
from pytest_capevolve._project.spec import Spec
from pytest_capevolve._stats.resolution import best_p, smallest_win


def test_twelve_val_tasks_need_five_wins_at_005_and_six_under_holm_with_three_siblings():
    assert smallest_win(F(1, 20), 12) == 5  # 1/32 ≤ 1/20 < 1/16
    assert smallest_win(F(1, 60), 12) == 6  # Holm's α/3: 1/64 ≤ 1/60 < 1/32
    assert smallest_win(F(1, 40), 12) == 6  # the first of two looks (α/2)
    assert smallest_win(F(1, 20), 4) is None  # even 4 of 4 gives p = 1/16 > 1/20


@given(st.integers(1, 40), st.fractions(F(1, 10**6), F(1, 2)))
def test_the_smallest_win_is_the_first_k_whose_best_p_meets_the_level(n, level):
    k = smallest_win(level, n)
    if k is None:
        assert best_p(n, n) > level
    else:
        assert best_p(k, n) <= level and (k == 1 or best_p(k - 1, n) > level)
        assert best_p(k, n) == F(1, 2**k)  # k better, none worse: only the all-positive pattern


def _spec(**keys) -> Spec:
    project = Path("/nowhere")
    return Spec(project / "capevolve.yaml", project, "adapter.py:A", project, **keys)


def test_the_next_level_takes_the_family_share_and_the_first_look():
    assert next_level(_spec(), [], 1)[0] == F(1, 20)
    assert next_level(_spec(), [], 3)[0] == F(1, 60)
    assert next_level(_spec(grow_max_looks=2), [], 1)[0] == F(1, 40)


def test_a_reject_below_its_levels_resolution_says_it_was_out_of_reach():
    per_task = {
        f"t{i}": {"best": 0.0, "candidate": 1.0 if i < 2 else 0.0, "delta": 1.0 if i < 2 else 0.0}
        for i in range(12)
    }
    verdict = Verdict(
        tag="c",
        against="seed",
        decision="reject",
        basis="exact",
        reason="p = 0.25 > α = 0.05",
        mode="exact",
        min_coverage=0.8,
        alpha=0.05,
        n_tasks=12,
        per_task=per_task,
    )
    noted = out_of_reach(verdict)
    assert noted.reason.endswith(
        "it improves 2 of 12 tasks, fewer than the 5 (with none worse) its level α = 0.05 can accept: out of reach on this val"
    )
    assert noted.details["resolution"] == {"improved": 2, "smallest_win": 5}
    wide = {t: {**row, "delta": 1.0} for t, row in per_task.items()}
    assert out_of_reach(Verdict(**{**verdict.__dict__, "per_task": wide})).reason == verdict.reason


def test_a_val_too_small_for_any_accept_is_told_so():
    from pytest_capevolve._policy.resolution import resolution

    found = resolution(_spec(), [], 4)
    assert (found["smallest_win"], found["reachable"]) == (None, False)
    assert found["sentence"].startswith("no candidate can be accepted at the next decision's level (α = 0.05")
    assert "1/2^4 > α" in found["sentence"]
    assert resolution(_spec(), [], 12, 3)["sentence"].endswith("improve ≥ 6 of 12 tasks with none worse")
