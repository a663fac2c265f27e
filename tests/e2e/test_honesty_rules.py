"""The honesty rules the docs state that live in session code, pinned end to end (the
decision-level ones, on hand-built reward matrices, are in tests/unit/test_honesty_rules.py)."""

from __future__ import annotations

import json
import shutil

import numpy as np

from pytest_capevolve._decide import gate

ACCEPT, REJECT, INDECISIVE = gate.ACCEPT, gate.REJECT, gate.INDECISIVE


def one_trial_arms(deltas):
    """Binary arms, one trial per task, whose per-task deltas are exactly ``deltas`` (−1, 0, 1)."""
    deltas = np.asarray(deltas, dtype=float)
    best = np.where(deltas >= 0, 0.0, 1.0)
    return (best + deltas)[:, None], best[:, None]


# -- the gate's α ---------------------------------------------------------------------------------


# -- the null-control floor -----------------------------------------------------------------------


# -- the coverage guard ---------------------------------------------------------------------------


# -- infra errors: missing data, and the imbalance guard ------------------------------------------


# -- the regression veto --------------------------------------------------------------------------


# -- order of the rules ---------------------------------------------------------------------------


# -- gating on val only ---------------------------------------------------------------------------


# -- rules that live in session code --------------------------------------------------------------

SCREEN = "id: careful-words\ncluster: prompt\ndescription: d\ntext: {file: prompt.md, contains: NOT-THERE}\n"


def test_tamper_guard_runs_before_microcases_and_neither_pays_a_rollout(example, projects, capevolve):
    project = example("toy_calc")
    (project / "capevolve.yaml").write_text(
        (project / "capevolve.yaml").read_text() + "protected_paths: [default]\n"
    )
    (project / "microcases").mkdir()
    (project / "microcases" / "screen.yaml").write_text(SCREEN)
    sneaky = project / "candidates" / "sneaky"
    shutil.copytree(project / "candidates" / "careful", sneaky)
    (sneaky / "answers.txt").write_text("q01: 42\n")  # adds a protected file, and fails the screen
    result = capevolve(project, "careful", sneaky, gate=True)
    assert result.ret == 11, result.stdout.str()  # an indecisive verdict outranks a reject
    rundir = projects.run_dir(project)
    verdicts = {t: json.loads((rundir / "verdicts" / f"{t}.json").read_text()) for t in ("careful", "sneaky")}
    assert (verdicts["sneaky"]["decision"], verdicts["sneaky"]["basis"]) == (INDECISIVE, "tamper")
    assert (verdicts["careful"]["decision"], verdicts["careful"]["basis"]) == (REJECT, "micro_test_fail")
    events = [json.loads(x) for x in (rundir / "events.jsonl").read_text().splitlines()]
    assert [e["tag"] for e in events if e["kind"] == "microcases"] == ["careful"]  # sneaky never screened
    # and with every candidate refused there is nothing to gate: the best and its null controls
    # are not paid for either
    assert not list((rundir / "rollouts" / "val").glob("*.json"))
