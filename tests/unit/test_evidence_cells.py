"""Records laid out once per tag (decide/evidence.py ``cells``) give the gate the same matrices
and infra counts as cutting the two arms to their shared cells record by record."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_capevolve._decide import gate
from pytest_capevolve._policy.gate import verdicts as judging
from pytest_capevolve._store.readers import evidence


@dataclass
class Record:
    """What the evidence reads of a rollout record, by attribute."""

    reward: float | None
    infra_error: str | None

    @property
    def valid(self) -> bool:
        return self.infra_error is None and self.reward is not None


def in_plan(arm, task_ids, num_trials):
    wanted = set(task_ids)
    return [r for (task_id, k), r in arm.items() if task_id in wanted and k < num_trials]


def infra_count(arm, task_ids, num_trials):
    """The reference the layout is checked against (and benchmarks/gate_speed.py times)."""
    return sum(1 for r in in_plan(arm, task_ids, num_trials) if r.infra_error is not None)


def shared_arms(a, b, task_ids, num_trials):
    """The two arms cut to the cells both have (a paired comparison reads the same seeds), and trials."""
    wanted = set(task_ids)
    cells = {c for c in a.keys() & b.keys() if c[0] in wanted and c[1] < num_trials}
    trials = max((k for _, k in cells), default=-1) + 1
    return {c: a[c] for c in cells}, {c: b[c] for c in cells}, trials


# a cell: no record, a reward, an infra error (with or without a stale reward)
CELL = st.one_of(
    st.none(),
    st.sampled_from([0.0, 0.25, 0.5, 1.0]).map(lambda r: Record(r, None)),
    st.sampled_from([None, 0.0, 1.0]).map(lambda r: Record(r, "timeout")),
)


@st.composite
def runs(draw):
    """Records of two tags over 1–8 tasks and up to 5 trials (some past the planned trials,
    some for tasks outside the plan), and the plan: task ids (maybe repeated) and trials."""
    tasks = draw(st.integers(1, 8))
    recorded_trials = draw(st.integers(1, 5))
    by_tag = {}
    for tag in ("cand", "best"):
        arm = {}
        for t in range(tasks + 1):  # t{tasks}: a task the plan leaves out
            for k in range(recorded_trials):
                record = draw(CELL)
                if record is not None:
                    arm[(f"t{t}", k)] = record
        by_tag[tag] = arm
    planned = draw(st.lists(st.integers(0, tasks - 1), min_size=1, max_size=tasks + 2))
    return by_tag, [f"t{t}" for t in planned], draw(st.integers(1, 4))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_shared_matrices_equal_cutting_the_arms_record_by_record(run):
    by_tag, task_ids, num_trials = run
    mine, theirs, trials = shared_arms(by_tag["cand"], by_tag["best"], task_ids, num_trials)
    trials = trials or num_trials
    expected = (
        evidence.reward_matrix(mine, task_ids, trials),
        evidence.reward_matrix(theirs, task_ids, trials),
        trials,
        infra_count(mine, task_ids, trials),
        infra_count(theirs, task_ids, trials),
    )
    found = evidence.shared_matrices(
        evidence.cells(by_tag["cand"], task_ids, num_trials),
        evidence.cells(by_tag["best"], task_ids, num_trials),
        num_trials,
    )
    for got, want in zip(found[:2], expected[:2], strict=True):
        assert got.shape == want.shape and got.tobytes() == want.tobytes()
    assert found[2:] == expected[2:]
    ev = judging.Evidence(by_tag, task_ids, num_trials, lambda tag: 0)
    assert (
        ev.matrix("cand").tobytes() == evidence.reward_matrix(by_tag["cand"], task_ids, num_trials).tobytes()
    )


def test_judge_reads_each_tag_once_and_decides_as_before():
    """Three candidates against one best: the best's records are laid out once, and each
    verdict is the one decide() gives on the record-by-record matrices."""
    rng = np.random.default_rng(2)
    ids = [f"t{i}" for i in range(40)]
    by_tag = {}
    for tag, lift in (("best", 0.0), ("c0", 0.0), ("c1", 0.3), ("c2", 0.6)):
        by_tag[tag] = {
            (t, k): Record(float(rng.random() < 0.3 + lift), "503" if rng.random() < 0.05 else None)
            for t in ids
            for k in range(3)
        }
    ev = judging.Evidence(by_tag, ids, 3, lambda tag: 0)
    config = gate.GateConfig()
    verdicts = [ev.judge(tag, "best", config) for tag in ("c0", "c1", "c2")]
    assert set(ev._cells) == {"best", "c0", "c1", "c2"}
    assert [v.decision for v in verdicts] == ["reject", "accept", "accept"]
    for tag, verdict in zip(("c0", "c1", "c2"), verdicts, strict=True):
        mine, theirs, trials = shared_arms(by_tag[tag], by_tag["best"], ids, 3)
        expected = gate.decide(
            evidence.reward_matrix(mine, ids, trials),
            evidence.reward_matrix(theirs, ids, trials),
            tag=tag,
            against="best",
            task_ids=ids,
            config=config,
            infra_errors={
                "candidate": infra_count(mine, ids, trials),
                "best": infra_count(theirs, ids, trials),
            },
        )
        assert verdict.to_dict() == expected.to_dict()
        assert verdict.infra_errors["candidate"] > 0
