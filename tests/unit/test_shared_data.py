"""Real data from a public cap-evolve run on tau2-bench airline (tests/data/README.md)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_capevolve._decide import gate

RECORDED = {  # tag: (Δ̄, SE) recorded by the original run's paired gate, n = 12
    "c0_null5": (-0.1000, 0.0628),
    "c0_null5b": (-0.0500, 0.0702),
    "c0_null5c": (0.0000, 0.0696),
    "cA_partial": (0.0167, 0.0672),
    "cB_becabin": (0.0167, 0.0796),
}


def arm(data, tag):
    ids = sorted(data["seed"])
    return np.array([data[tag][t]["trials"] for t in ids], float), ids


@pytest.mark.parametrize("tag", sorted(RECORDED))
def test_paired_mode_reproduces_recorded_numbers(shared_data, tag):
    cand, ids = arm(shared_data, tag)
    best, _ = arm(shared_data, "seed")
    verdict = gate.decide(
        cand,
        best,
        tag=tag,
        against="seed",
        task_ids=ids,
        config=gate.GateConfig(mode="paired", k_se=0.2, veto_regressions=True),
    )
    assert verdict.n_tasks == 12
    assert round(verdict.delta_mean, 4) == pytest.approx(RECORDED[tag][0], abs=1e-12)
    assert round(verdict.se, 4) == pytest.approx(RECORDED[tag][1], abs=1e-12)
    # the original run rejected all five: the nulls by the rule, the two edits by the veto on task 8
    assert verdict.decision == "reject"
    if tag.startswith("c0"):
        assert verdict.basis == "paired"
    else:
        assert verdict.basis == "regression_veto"
        assert [r["task_id"] for r in verdict.regressions] == ["8"]


def test_recorded_paired_bar_for_cA(shared_data):
    cand, ids = arm(shared_data, "cA_partial")
    best, _ = arm(shared_data, "seed")
    verdict = gate.decide(
        cand, best, tag="cA", against="seed", task_ids=ids, config=gate.GateConfig(mode="paired", k_se=0.2)
    )
    assert verdict.decision == "accept"  # the rule alone accepted: 0.0167 > 0.2·SE = 0.0134
    assert round(verdict.bar, 4) == 0.0134


@pytest.mark.parametrize("null", ["c0_null5", "c0_null5b", "c0_null5c"])
def test_default_gate_accepts_no_null_arm(shared_data, null):
    best, ids = arm(shared_data, "seed")
    cand, _ = arm(shared_data, null)
    for a, b in ((cand, best), (best, cand)):
        assert (
            gate.decide(a, b, tag=null, against="seed", task_ids=ids, config=gate.GateConfig()).decision
            == "reject"
        )
