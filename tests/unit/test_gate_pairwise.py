"""The gate's ``pairwise`` mode as a rule: the sign test on the judge's net preferences per
task (GateConfig.preferences), an exact p that Holm splits α on, no reward floor, and a way
on when no preference was judged."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest

from pytest_capevolve._decide.gate import GATE_MODES, decide
from pytest_capevolve._decide.rounds import gate_round
from pytest_capevolve._decide.verdict import GateConfig
from pytest_capevolve._engine.judging import prefer_in_order
from pytest_capevolve._policy.gate.verdicts import Evidence
from pytest_capevolve._project.adapter import AdapterError, Task
from pytest_capevolve._stats.pairwise import p_greater_exact
from pytest_capevolve._store.readers.evidence import index_records

TASKS = [f"t{i}" for i in range(8)]
SAME = np.full((8, 2), 0.5)  # the rewards do not decide in this mode


def verdict(preferences, **config):
    return decide(
        SAME,
        SAME,
        tag="cand",
        against="seed",
        task_ids=TASKS,
        config=GateConfig(mode="pairwise", preferences=preferences, **config),
    )


def test_pairwise_is_a_gate_mode_and_decides_on_the_preferences_not_the_rewards():
    assert "pairwise" in GATE_MODES
    accepted = verdict((2, 1, 1, 2, 1, 1, 2, 1))
    assert (accepted.decision, accepted.basis, accepted.p_exact) == ("accept", "pairwise", "1/256")
    assert accepted.alpha == 0.05 and "preferred on 8 tasks" in accepted.reason
    tied = verdict((2, 1, 1, 2, 1, 0, 0, -1))
    assert tied.decision == "reject" and "2 tied (net zero, not tested)" in tied.reason
    assert tied.p_exact == str(p_greater_exact(5, 1))


def test_the_reward_floor_of_the_null_controls_does_not_veto_a_preference(val_rollout):
    """Δ̄ of the rewards is 0 here, under any null spread: the floor would veto; the sign test
    is its own null, so a pairwise verdict is judged without it, with its failures said."""
    records = [val_rollout(tag, t, 0, 0.5) for tag in ("cand", "seed") for t in TASKS]
    found = Evidence(index_records(records), TASKS, 1, lambda tag: 0)
    # (t9 unjudged counted at worst, the best preferred in both orders: 8 to 1, p = 10/512)
    failed = ["t9 trial 0: judge API down"]
    found.preferences = lambda tag, against: ((1,) * 8, failed, ((1,) * 8 + (-2,), 1))
    config = GateConfig(mode="pairwise")
    judged = found.judge("cand", "seed", config, null_deltas=[0.1, -0.1])
    assert (judged.decision, judged.null_spread) == ("accept", None)
    assert (
        judged.warnings[-1].startswith("1 paired trial(s) not judged") and "API down" in judged.warnings[-1]
    )


def test_an_accept_the_unjudged_cells_could_flip_is_indecisive(val_rollout):
    """A candidate can make the judge fail on the tasks it would lose: those cells are weighed
    at worst (the best preferred in both orders), as unequal infra errors are; 5 to 0 with one
    cell unjudged is 5 to 1 at worst, p = 7/64: indecisive, naming why and the way on."""
    records = [val_rollout(tag, t, 0, 0.5) for tag in ("cand", "seed") for t in TASKS]
    found = Evidence(index_records(records), TASKS, 1, lambda tag: 0)
    failed = ["t9 trial 0: judge reply unparsable"]
    found.preferences = lambda tag, against: ((1,) * 5, failed, ((1,) * 5 + (-2,), 1))
    judged = found.judge("cand", "seed", GateConfig(mode="pairwise"))
    assert judged.decision == "indecisive", judged.reason
    assert "could flip the decision (worst-case: the best preferred in both, p = 0.1094)" in judged.reason
    assert "gate again" in judged.reason and "--capevolve-new-run" in judged.reason
    assert "unparsable" in judged.warnings[-1]
    found.preferences = lambda tag, against: ((1,) * 5, [], None)  # all judged: the same 5 to 0
    assert found.judge("cand", "seed", GateConfig(mode="pairwise")).decision == "accept"


def test_no_preference_judged_is_indecisive_naming_the_gate_session():
    found = verdict(None)
    assert found.decision == "indecisive" and "whose gate_mode is pairwise judges them" in found.reason


def test_siblings_share_alpha_by_holm_on_the_exact_p():
    prefs = {"a": (1,) * 8, "b": (1,) * 5 + (-1,) * 3}

    def judge(tag, against, config):
        config = replace(config, preferences=prefs[tag])
        return decide(SAME, SAME, tag=tag, against=against, task_ids=TASKS, config=config)

    first, second = gate_round(judge, ["a", "b"], "seed", GateConfig(mode="pairwise"), "holm").verdicts
    assert (first.decision, first.alpha) == ("accept", 0.025) and "0.05 / 2 by Holm" in first.reason
    assert (second.decision, second.against) == ("reject", "a")  # re-gated against the round's accept


@given(st.integers(0, 30), st.integers(0, 30))
def test_the_exact_p_is_scipys_binomtest(wins_b, wins_a):
    p = p_greater_exact(wins_b, wins_a)
    assert isinstance(p, Fraction) and 0 < p <= 1
    greater = (
        binomtest(wins_b, wins_b + wins_a, 0.5, alternative="greater").pvalue if wins_b + wins_a else 1.0
    )
    assert abs(float(p) - greater) < 1e-12


class FirstShown:
    """A judge that always prefers the output shown first, and says what it was shown."""

    def __init__(self, answer="A"):
        self.answer, self.shown = answer, []

    def prefer(self, task, output_a, output_b, *, seed):
        self.shown.append((output_a, output_b, seed))
        return self.answer


def test_a_judgement_in_the_swapped_order_is_named_by_arm_and_a_bad_answer_is_refused():
    task = Task(id="q1", input="1 + 1", target=2)
    judge = FirstShown()
    assert prefer_in_order(judge, task, "best", "cand", order="AB", seed=5) == "A"
    assert prefer_in_order(judge, task, "best", "cand", order="BA", seed=6) == "B"  # cand was first
    assert judge.shown == [("best", "cand", 5), ("cand", "best", 6)]
    assert prefer_in_order(FirstShown("tie"), task, 1, 2, order="BA", seed=0) == "tie"
    with pytest.raises(AdapterError, match=r"returned 'first'; return 'A' \(the first output"):
        prefer_in_order(FirstShown("first"), task, 1, 2, order="AB", seed=0)
