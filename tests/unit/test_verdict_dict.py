"""A verdict's dict (decide/verdict.py ``Verdict.to_dict``) is what ``dataclasses.asdict``
gives — same values, same types, nothing shared with the verdict — though it is made without
asdict's deep copy of every number (a 10,000-task verdict holds 50,000 in ``per_task``)."""

from __future__ import annotations

from dataclasses import asdict
from fractions import Fraction

import numpy as np

from pytest_capevolve._decide.verdict import GateConfig, Verdict


def a_verdict() -> Verdict:
    return Verdict(
        tag="cand",
        against="seed",
        decision="reject",
        basis="exact",
        reason="p = 1 > α",
        mode="exact",
        min_coverage=0.8,
        alpha=Fraction(1, 40),
        ci=[-0.1, 0.2],
        per_task={f"t{i}": {"candidate": i / 10, "best": None} for i in range(5)},
        regressions=[{"task": "t1", "delta": -0.5}],
        details={"looks": [(1, 0.5)], "config": GateConfig(), "spread": np.float64(0.25), ("a", 1): {"x"}},
    )


def test_the_dict_is_asdicts_and_its_own() -> None:
    verdict = a_verdict()
    made, expected = verdict.to_dict(), asdict(verdict)
    assert expected.pop("judge_noise") is None and "judge_noise" not in made  # absent unless re-scored
    assert expected.pop("margin") is None and "margin" not in made  # absent unless a margin is asked
    assert made == expected and list(made) == list(expected)
    assert type(made["alpha"]) is Fraction and type(made["details"]["spread"]) is np.float64
    assert made["details"]["looks"] == [(1, 0.5)] and type(made["details"]["looks"][0]) is tuple
    assert made["details"]["config"] == asdict(GateConfig())  # a dataclass inside: a dict, as asdict
    made["per_task"]["t1"]["candidate"] = 9.0
    made["details"][("a", 1)].add("y")
    assert verdict.per_task["t1"]["candidate"] == 0.1 and verdict.details[("a", 1)] == {"x"}  # a copy
