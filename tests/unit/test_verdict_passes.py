"""The session and ``capevolve gate`` pass a judged verdict through one declared list
(:data:`pytest_capevolve._policy.gate.regate.VERDICT_PASSES`), so the two cannot answer differently."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

from pytest_capevolve._decide.verdict import Verdict
from pytest_capevolve._policy.gate import regate
from pytest_capevolve._project.spec import load_spec
from pytest_capevolve._session import gating, grow

PASS_FUNCTIONS = {
    "with_looks",
    "out_of_reach",
    "with_settings",
    "with_label",
    "first_outcomes",
    "repaid_details",
}


def _calls(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.id if isinstance(func, ast.Name) else getattr(func, "attr", ""))
    return names


def test_the_session_and_capevolve_gate_run_the_same_passes():
    session = _calls(inspect.getsource(gating._judged_round)) | _calls(inspect.getsource(gating.judge))
    cli = _calls(inspect.getsource(regate.regate))
    for path in (session, cli):
        assert "passed" in path and "first_evidence" in path
        assert not path & PASS_FUNCTIONS, "a pass called outside the list runs on one path only"


def test_a_grow_judges_the_first_logged_outcomes_too():
    assert "first_evidence" in _calls(textwrap.dedent(inspect.getsource(grow.GrowSession._judge)))


def test_a_pass_declared_in_the_list_runs_on_every_path(monkeypatch):
    seen = []
    probe = ("probe", lambda p, v: seen.append(v.tag) or v)
    monkeypatch.setattr(regate, "VERDICT_PASSES", (*regate.VERDICT_PASSES, probe))
    verdict = Verdict(
        tag="c1", against="seed", decision="reject", basis="exact", reason="r", mode="exact", min_coverage=0.8
    )
    out = regate.passed(regate.Passing(_spec(), {"c1": 2, "seed": 0}), verdict)
    assert seen == ["c1"]
    assert out.details["repaid_rollouts"] == {"c1": 2, "seed": 0}
    assert out.details["looks"]["look"] == 1 and "gate_settings" in out.details


def _spec():
    return load_spec(Path(__file__).parents[2] / "examples" / "toy_calc")


def test_capevolve_gate_keeps_a_grown_verdicts_looks_as_its_grow_wrote_them():
    grown = {"look": 2, "max_looks": 3, "decision_alpha": "1/80", "level_exact": "1/80"}
    recorded = {"details": {"looks": grown, "overridden": {"gate_alpha": "0.1"}}}
    passing = regate.Passing.as_recorded(_spec(), {}, recorded, regate.GateAsk("c1"))
    verdict = Verdict(
        tag="c1", against="seed", decision="reject", basis="exact", reason="r", mode="exact", min_coverage=0.8
    )
    out = regate.passed(passing, verdict)
    assert out.details["looks"] == grown
    assert out.details["overridden"] == {"gate_alpha": "0.1"}
