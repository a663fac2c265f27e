"""Once every candidate is decided the null controls and the best stop: a sibling decided early (a
sacrificial copy) cannot make them stop before the other candidate is decided, nor shorten the tasks
their floor is read on (no session: the gate fed rollouts by hand)."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest

from pytest_capevolve._decide.task_order import interleaved
from pytest_capevolve._session.sequential_gate import SequentialGate
from pytest_capevolve._store.rollouts.record import RolloutRecord

TASKS = [f"t{i:02d}" for i in range(30)]


class Nothing:
    def indexed_rollouts(self, *args: object) -> list[RolloutRecord]:
        return []

    def of_kinds(self, *kinds: str) -> list[dict[str, object]]:
        return []


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "a sequential gate with two candidates, one a sacrificial copy that fails every task (decided for "
        "futility at once), so that the null controls and the best stop early and the floor is read on its "
        "few tasks"
    ),
    outcome=(
        "prevented: the nulls and the best stop only once every candidate is decided, and the nulls' floor "
        "is read up to the last task of every candidate's decided prefix"
    ),
)
def test_a_sibling_decided_at_once_stops_neither_the_nulls_nor_the_best() -> None:
    orders = {"real": TASKS[::-1], "sacrifice": TASKS[1::2] + TASKS[::2]}
    order = list(interleaved([orders["real"], orders["sacrifice"]]))
    plan = SimpleNamespace(
        task_ids=TASKS, num_trials=1, orders=orders, order=order, split="val", block=None, sequential=None
    )
    gated = ["real", "sacrifice", "seed-null1"]
    gate = SequentialGate(
        config=SimpleNamespace(stash={}),  # type: ignore[arg-type]
        spec=SimpleNamespace(gate_min_effect=0.05, success_threshold=1.0),  # type: ignore[arg-type]
        rundir=SimpleNamespace(rollouts=Nothing(), log=Nothing(), run_id="r", rollout_file=str),  # type: ignore[arg-type]
        plan=plan,  # type: ignore[arg-type]
        best="seed",
        gated=gated,
        alphas={tag: Fraction(1, 40) for tag in gated},
        nulls=["seed-null1"],
    )

    def feed(tag: str, task: str, reward: float) -> None:
        gate._add(RolloutRecord("r", "val", task, tag, 0, 0, "h", reward=reward))

    looked = 0
    for task in order:  # the session's order: every tag's rollout of a task, then the next task
        feed("seed", task, 1.0)
        feed("sacrifice", task, 0.0)  # every task lost: futility at once
        feed("seed-null1", task, 1.0)
        feed("real", task, 1.0)  # no better, no worse: undecided for long
        gate._update(gated)
        if gate.decisions["sacrifice"].decided and not gate.decisions["real"].decided:
            assert gate.horizon() is None
            assert {"seed-null1", "seed"}.isdisjoint(gate.stopped)
            looked += 1
    assert looked > 10  # the sacrifice was decided within the first tasks, the other never
    assert gate.decisions["sacrifice"].decided and gate.decisions["sacrifice"].state.stopped == "futility"
    assert "seed-null1" not in gate.stopped and "seed" not in gate.stopped  # 'real' never decided
