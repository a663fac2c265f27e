"""Legacy ``paired`` mode decides Δ̄ > k·SE on fractions: a one-task gain (Δ̄ = SE exactly at
k = 1) gets one decision at every n — cap-evolve's issue #351 accepted it at n = 10, 11, 20, 30,
40 and rejected it at n = 12, on the last bit of a float (issue 26, item 5)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._decide import gate
from pytest_capevolve._decide.verdict import ACCEPT, REJECT

PAIRED = gate.GateConfig(mode="paired", k_se=1.0, min_coverage=0.0)


def _one_task_gain(n: int, trials: int, gained: int) -> tuple[np.ndarray, np.ndarray]:
    """n tasks, the best passing none; the candidate passes ``gained`` of ``trials`` on task 0."""
    best = np.zeros((n, trials))
    candidate = best.copy()
    candidate[0, :gained] = 1.0
    return candidate, best


def _decision(candidate: np.ndarray, best: np.ndarray) -> str:
    ids = [f"t{i}" for i in range(candidate.shape[0])]
    return gate.decide(candidate, best, tag="c", against="b", task_ids=ids, config=PAIRED).decision


def test_the_issue_351_sizes_get_one_decision() -> None:
    """The float rule: accept at 10, 11, 20, 30, 40, reject at 12. A tie is not > : reject all."""
    decisions = {n: _decision(*_one_task_gain(n, 1, 1)) for n in (10, 11, 12, 20, 30, 40)}
    assert set(decisions.values()) == {REJECT}, decisions


@given(
    n=st.integers(min_value=2, max_value=60),
    trials=st.integers(min_value=1, max_value=5),
    data=st.data(),
)
def test_a_one_task_gain_gets_the_same_decision_at_every_n(n: int, trials: int, data: st.DataObject) -> None:
    gained = data.draw(st.integers(min_value=1, max_value=trials))
    assert _decision(*_one_task_gain(n, trials, gained)) == REJECT  # Δ̄ = SE: a tie, never above


def test_just_above_the_tie_accepts_at_every_n() -> None:
    """Two tasks gained, at k = 1: Δ̄ = 2/n > SE = √(2(n−2)/(n−1))/n for every n ≥ 3."""
    for n in range(3, 61):
        candidate, best = _one_task_gain(n, 1, 1)
        candidate[1, 0] = 1.0
        assert _decision(candidate, best) == ACCEPT, n


ONE_FIX = '''

class OneFixAdapter(ToyCalcAdapter):
    """Answers a task right when the prompt names it ("fix q07"): a one-task gain."""

    def run_target(self, task, ctx, *, seed):
        rollout = super().run_target(task, ctx, seed=seed)
        if f"fix {task.id}" in (Path(ctx) / "prompt.md").read_text():
            rollout.output = task.target
        return rollout
'''


def test_a_gate_session_in_paired_mode_rejects_a_one_task_gain_at_ten_val_tasks(
    example, projects, capevolve
) -> None:
    """End to end, at n = 10 (where floats accepted the tie): gate_mode paired, k = 1, one val
    task the seed fails fixed. The verdict says the rule and that it was decided exactly."""
    import json

    project = example("toy_calc")
    projects.add_adapter(project, ONE_FIX, "adapter.py:OneFixAdapter")
    projects.edit_spec(project, "split_train: 0.25\nsplit_val: 0.5", "split_train: 0.33\nsplit_val: 0.42")
    # the candidate names the task it fixes (the stand-in agent reads it): no leak guard here
    projects.edit_spec(
        project,
        "num_trials: 1",
        "num_trials: 1\ngate_mode: paired\ngate_k_se: 1.0\nleak_guard_min_length: false",
    )
    assert capevolve(project).ret == 0
    run = projects.run_dir(project)
    val = json.loads((run / "splits.json").read_text())["val"]
    assert len(val) == 10
    failed = sorted(r["task_id"] for r in projects.rollout_records(project).values() if not r["passed"])
    one = project / "candidates" / "one"
    one.mkdir()
    (one / "prompt.md").write_text((project / "capability" / "prompt.md").read_text() + f"fix {failed[0]}\n")
    gated = capevolve(project, "one", gate=True, extra=["--capevolve-null", "0"])
    verdict = json.loads((run / "verdicts" / "one.json").read_text())
    assert gated.ret == 10 and verdict["decision"] == REJECT, verdict["reason"]
    assert verdict["mode"] == "paired" and "decided on exact fractions" in verdict["reason"]
