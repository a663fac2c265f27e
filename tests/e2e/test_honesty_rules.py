"""Every honesty rule the README states about decisions, pinned at its boundary.

Decision-level tests build small reward matrices by hand, so the expected decision is known
exactly: p just below and just above α, Δ̄ just above and just below the null spread, coverage
exactly at and just under the minimum. Each test fails when its rule is removed or weakened
(README, "What the gate promises", names the test for each promise). The few end-to-end tests
(marker ``e2e``) cover rules that live in session code.
"""

from __future__ import annotations

import itertools
import json
import shutil
from fractions import Fraction

import numpy as np

from pytest_capevolve._decide import gate

ACCEPT, REJECT, INDECISIVE = gate.ACCEPT, gate.REJECT, gate.INDECISIVE
EXACT = gate.GateConfig()  # the default gate: exact sign-flip test, α = 0.05, min_coverage 0.8


def judge(candidate, best, config=EXACT, **kw):
    candidate, best = np.asarray(candidate, float), np.asarray(best, float)
    ids = [f"t{i}" for i in range(len(candidate))]
    return gate.decide(candidate, best, tag="cand", against="best", task_ids=ids, config=config, **kw)


def one_trial_arms(deltas):
    """Binary arms, one trial per task, whose per-task deltas are exactly ``deltas`` (−1, 0, 1)."""
    deltas = np.asarray(deltas, dtype=float)
    best = np.where(deltas >= 0, 0.0, 1.0)
    return (best + deltas)[:, None], best[:, None]


def moved(k, n=10):
    """n tasks of which the first k improved from 0 to 1: p = 1/2^k exactly, Δ̄ = k/n."""
    return one_trial_arms([1] * k + [0] * (n - k))


def brute_force_p(deltas) -> Fraction:
    """Reference one-sided sign-flip p-value: share of the 2^N sign patterns of the nonzero
    deltas whose sum is at least the observed one (exact rational arithmetic)."""
    values = [Fraction(d).limit_denominator(10**6) for d in deltas if d != 0]
    if not values:
        return Fraction(1)
    observed = sum(values)
    hits = sum(
        1
        for signs in itertools.product((1, -1), repeat=len(values))
        if sum(s * abs(v) for s, v in zip(signs, values, strict=True)) >= observed
    )
    return Fraction(hits, 2 ** len(values))


# -- the gate's α ---------------------------------------------------------------------------------


# -- the null-control floor -----------------------------------------------------------------------


# -- the coverage guard ---------------------------------------------------------------------------


# -- infra errors: missing data, and the imbalance guard ------------------------------------------


FLIPPABLE_ACCEPT = (  # Δ̄ = +1/3 on 5 tasks (p = 1/32); the candidate's missing trials as fails: −1/3
    np.array([[1, np.nan, np.nan]] * 5, float),
    np.array([[0, 1, 1]] * 5, float),
)
FLIPPABLE_REJECT = (  # Δ̄ = −1/3; the candidate's missing trials as passes: +1/3 on 5 tasks
    np.array([[0, np.nan, np.nan]] * 5, float),
    np.array([[1, 0, 0]] * 5, float),
)
STABLE_ACCEPT = (  # Δ̄ = +1; worst case for the candidate is still +2/3 on 5 tasks
    np.array([[1, 1, np.nan]] * 5, float),
    np.array([[0, 0, 0]] * 5, float),
)


# -- the regression veto --------------------------------------------------------------------------


def veto_arms():
    """12 tasks × 4 trials: ten improve 0 → 1; the best passed t10 and t11, which drop.

    t10: best [1,1,1,1] → candidate [1,0,0,0]: drop 0.75 > noise 2·SE = 0.5 (a regression)
    t11: best [1,1,1,1] → candidate [1,1,0,0]: drop 0.5 < noise 2·SE ≈ 0.577 (within noise)
    """
    cand = np.array([[1, 1, 1, 1]] * 10 + [[1, 0, 0, 0], [1, 1, 0, 0]], float)
    best = np.array([[0, 0, 0, 0]] * 10 + [[1, 1, 1, 1], [1, 1, 1, 1]], float)
    return cand, best


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
