"""LLM-judge scorers: a declared-stochastic ``score()`` re-scored r times per rollout
(``_engine/judging.py``), and the split of Δ̄'s variance into the judge's and the agent's
(``_stats/judge_noise.py``)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from pytest_capevolve import exitcodes
from pytest_capevolve._cli.main import main
from pytest_capevolve._engine import judging
from pytest_capevolve._engine.runner import AdapterRunner, run_and_score
from pytest_capevolve._project.adapter import AdapterError, Rollout, Score, Task
from pytest_capevolve._stats.judge_noise import JudgeSplit, arm_within, best_rescores, split
from pytest_capevolve._store.rollouts.record import RolloutRecord

TASK = Task(id="q", input="2 + 2", target=4)


def rescores_pay_more(result: JudgeSplit, cost_ratio: float | None = None) -> bool:
    """Whether one more re-score removes more variance per unit spent than one more trial (r < r*).
    ``cost_ratio`` ρ: an agent run in judge calls; None assumes ρ = r (also benchmarks/judge_noise.py's)."""
    best = best_rescores(result.within_judge, result.within_total, result.rescores, cost_ratio)
    return best is not None and result.rescores < best


class Agent:
    def tasks(self, split):
        return [TASK]

    def run_target(self, task, ctx, *, seed):
        return Rollout(task_id=task.id, output=4)


class Deterministic(Agent):
    calls = 0

    def score(self, task, rollout):
        Deterministic.calls += 1
        return Score(reward=1.0)


class Judge(Agent):
    """An LLM judge stand-in: right four times in five, at the seed it is given."""

    stochastic_score = True

    def score(self, task, rollout, *, seed):
        return Score(reward=float(random.Random(f"{task.id}|{seed}").random() < 0.8))


def test_a_deterministic_scorer_is_scored_once_and_its_record_has_no_judge_field(tmp_path):
    Deterministic.calls = 0
    scored = run_and_score(AdapterRunner(Deterministic()), TASK, tmp_path, seed=0, split="val")
    assert (scored.reward, scored.judge, Deterministic.calls) == (1.0, None, 1)
    record = RolloutRecord("r", "val", "q", "seed", 0, 0, "h", reward=1.0)
    assert '"judge"' not in record.dumps() and "judge" not in record.to_json()


def test_a_stochastic_scorer_is_scored_r_times_with_recorded_seeds_and_the_mean_is_the_reward(tmp_path):
    scored = run_and_score(AdapterRunner(Judge(), judge_rescores=5), TASK, tmp_path, seed=3, split="val")
    stride = judging.JUDGE_SEED_STRIDE
    assert scored.judge["seeds"] == [3 + stride * j for j in range(5)]
    expected = [Judge().score(TASK, None, seed=s).reward for s in scored.judge["seeds"]]
    assert scored.judge["rewards"] == expected and scored.reward == pytest.approx(sum(expected) / 5)
    record = RolloutRecord("r", "val", "q", "seed", 0, 3, "h", reward=scored.reward, judge=scored.judge)
    assert RolloutRecord.loads(record.dumps()).judge == scored.judge


def test_re_scores_of_a_scorer_not_declared_stochastic_are_refused_in_one_line():
    with pytest.raises(AdapterError, match="judge_rescores: 3 needs a stochastic scorer"):
        AdapterRunner(Deterministic(), judge_rescores=3)


def test_a_re_score_outside_0_1_is_an_infra_error_never_a_clamp(tmp_path):
    class Wild(Judge):
        def score(self, task, rollout, *, seed):
            return Score(reward=1.5 if seed > 10 else 1.0)

    scored = run_and_score(AdapterRunner(Wild(), judge_rescores=2), TASK, tmp_path, seed=0, split="val")
    assert scored.reward is None and "re-score 1" in scored.infra_error


def _simulate(rng, n, k, r, agent_sd, judge_sd, effect=0.0):
    """Per task, two arms of k rollouts × r re-scores: agent outcome + judge noise."""
    deltas, judge, within = [], [], []
    for _ in range(n):
        base = rng.normal(0.5, 0.1)
        arms = []
        for shift in (effect, 0.0):
            agent = base + shift + rng.normal(0, agent_sd, size=(k, 1))
            arms.append(agent + rng.normal(0, judge_sd, size=(k, r)))
        deltas.append(arms[0].mean() - arms[1].mean())
        (jc, wc), (jb, wb) = arm_within(arms[0]), arm_within(arms[1])
        judge.append(jc + jb)
        within.append(wc + wb)
    return split(np.array(deltas), np.array(judge), np.array(within), r)


@pytest.mark.parametrize(("agent_sd", "judge_sd"), [(0.05, 0.3), (0.3, 0.05), (0.2, 0.2)])
def test_the_split_recovers_known_agent_and_judge_variances(agent_sd, judge_sd):
    rng = np.random.default_rng(7)
    n, k, r = 8000, 3, 3
    result = _simulate(rng, n, k, r, agent_sd, judge_sd)
    # truth: Var(d_t) = 2 (σa²/k + σj²/(k r)) (the task's base cancels in the paired delta)
    judge_truth = 2 * judge_sd**2 / (k * r)
    total_truth = 2 * agent_sd**2 / k + judge_truth
    assert result.judge_share == pytest.approx(judge_truth / total_truth, abs=0.06)  # ~4 SE at n = 8000
    assert rescores_pay_more(result) == (judge_sd**2 / r > agent_sd**2)


def test_the_split_refuses_a_single_task():
    with pytest.raises(ValueError, match="two tasks"):
        split(np.array([0.1]), np.array([0.0]), np.array([0.0]), 2)


def test_check_accepts_a_re_score_that_differs_only_for_a_declared_stochastic_scorer(
    example, projects, capsys
):
    project = example("toy_calc")
    projects.add_adapter(
        project,
        "\nimport itertools\n_n = itertools.count()\n"
        "class Judged(ToyCalcAdapter):\n"
        "    stochastic_score = True\n"
        "    def score(self, task, rollout):\n"
        "        return Score(reward=float(next(_n) % 2))\n",
        "adapter.py:Judged",
    )
    assert main(["check", str(project)]) == 0
    assert "score is declared stochastic (stochastic_score = True)" in capsys.readouterr().out


@pytest.mark.attack(
    "inputs",
    attack="an LLM judge's recorded re-scores edited in a record",
    outcome="refused when the record is read",
)
@pytest.mark.parametrize(
    "judge",
    [
        {"rewards": [1.0, 0.0, 0.0], "seeds": [0, 1, 2]},  # re-scores edited: mean 1/3 ≠ reward
        {"rewards": [1.0, 1.0], "seeds": [0]},  # a seed missing
        {"rewards": [1.5, 0.5], "seeds": [0, 1]},  # a re-score outside [0, 1]
        "1,1,1",
    ],
)
def test_an_edited_judge_field_is_refused_when_the_record_is_read(judge):
    """Attack: rewrite a record's re-scores so the split blames (or clears) the judge. The
    reward must be their mean; a record that disagrees is refused (quarantined, re-paid)."""
    from pytest_capevolve._store.rollouts.record import RecordError

    record = RolloutRecord(
        "r", "val", "q", "seed", 0, 0, "h", reward=1.0, judge={"rewards": [1.0] * 3, "seeds": [0, 1, 2]}
    )
    assert RolloutRecord.loads(record.dumps()).reward == 1.0
    data = record.to_json() | {"judge": judge}
    with pytest.raises(RecordError, match="judge"):
        RolloutRecord.from_json(data)


def test_the_spec_lock_of_a_project_without_re_scores_is_what_it_was(examples):
    from pytest_capevolve._project.spec import load_spec

    assert "judge_rescores" not in load_spec(examples / "toy_calc").to_lock()


def test_judge_noise_is_refused_naming_the_verdicts_split(capsys):
    assert main(["judge-noise", "careful"]) == exitcodes.USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "judge-noise is gone" in err and "capevolve gate TAG --json" in err


def test_a_verdict_carries_the_split_of_the_cells_it_compared():
    """``Evidence.judge`` adds ``judge_noise`` to every verdict it makes, from the re-scores of
    the cells the gate compared: the first ``num_trials`` trials (a grown verdict's pooled
    trials, a null's shared ones), the evidence's tasks (a sequential verdict's seen ones)."""
    from pytest_capevolve._policy.gate.verdicts import Evidence, gate_config
    from pytest_capevolve._project.spec import load_spec

    rng = random.Random(4)
    tasks, trials = [f"t{i}" for i in range(6)], 4
    by_tag, rescores = {}, {}
    for tag in ("cand", "seed"):
        for t in tasks:
            for k in range(trials):
                scores = [float(rng.random() < 0.6) for _ in range(3)]
                record = RolloutRecord("r", "val", t, tag, k, k, "h", reward=sum(scores) / 3)
                by_tag.setdefault(tag, {})[(t, k)] = record
                rescores.setdefault(tag, {})[(t, k)] = scores
    config = gate_config(load_spec(Path(__file__).resolve().parents[2] / "examples" / "toy_calc"))

    def verdict(task_ids, num_trials):
        evidence = Evidence(by_tag, task_ids, num_trials, lambda tag: 0, lambda: rescores)
        return evidence.judge("cand", "seed", config)

    full, first_two, seen = verdict(tasks, trials), verdict(tasks, 2), verdict(tasks[:3], trials)
    assert full.judge_noise["rescores"] == 3 and full.judge_noise["n_tasks"] == 6
    assert full.judge_noise["var_total"] == pytest.approx(full.se**2)
    assert (
        first_two.judge_noise["var_total"] == pytest.approx(first_two.se**2) != full.judge_noise["var_total"]
    )
    assert seen.judge_noise["n_tasks"] == 3 == seen.n_tasks
    assert "judge_noise" in full.to_dict()
    # without re-scores (judge_rescores: 1) the verdict is as it was: no key at all
    plain = Evidence(by_tag, tasks, trials, lambda tag: 0).judge("cand", "seed", config)
    assert plain.judge_noise is None and "judge_noise" not in plain.to_dict()


def test_every_verdict_maker_builds_its_evidence_with_the_runs_readers():
    """One mechanism: the gate session, grow, the sequential gate, ``capevolve gate`` and the
    session's explanation all make their evidence with ``Evidence.of_run`` (which wires the
    re-scores), never with a bare ``Evidence(...)`` that would leave ``judge_noise`` out."""
    import re

    package = Path(__file__).resolve().parents[2] / "pytest_capevolve"
    bare = [
        f"{path.relative_to(package)}:{n}"
        for path in package.rglob("*.py")
        if path.name != "verdicts.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bEvidence\(", line)
    ]
    assert bare == []
    # the gate session's and the grow's evidence is regate.first_evidence's (`capevolve gate`'s)
    makers = ["_session/sequential_gate.py", "_policy/gate/regate.py"]
    assert all("Evidence.of_run(" in (package / m).read_text(encoding="utf-8") for m in makers)


# -- the advice weighs a re-score against a trial at their costs (issue 39, item 7) ---------------


def _exact_variance(k: int, r: int, agent_sd: float, judge_sd: float) -> float:
    """V of a task-arm mean over k rollouts of r re-scores each (the model, exactly)."""
    return agent_sd**2 / k + judge_sd**2 / (k * r)


@pytest.mark.parametrize("cost_ratio", [1.0, 3.0, 10.0, 40.0])
@pytest.mark.parametrize(("agent_sd", "judge_sd"), [(0.05, 0.3), (0.2, 0.2), (0.3, 0.1)])
def test_r_star_is_where_a_rescore_and_a_trial_buy_the_same_variance_per_unit_cost(
    cost_ratio, agent_sd, judge_sd
):
    """An independent reference: the exact variance of the model, at a fixed budget, is least
    at r*; a re-score pays more below it and a trial above it (marginal gains per unit cost)."""
    from pytest_capevolve._stats.judge_noise import best_rescores

    k = 3
    for r in (1, 2, 3, 5, 8):
        within_judge = judge_sd**2 / (k * r)
        within_total = _exact_variance(k, r, agent_sd, judge_sd)
        best = best_rescores(within_judge, within_total, r, cost_ratio)
        assert best == pytest.approx(np.sqrt(cost_ratio) * judge_sd / agent_sd)
        # marginal gains per unit cost (in judge calls, per task-arm): a trial costs ρ + r, a
        # re-score of every rollout k; a small step h of each
        h = 1e-6
        gain_trial = (within_total - _exact_variance(k + h, r, agent_sd, judge_sd)) / ((cost_ratio + r) * h)
        gain_rescore = (within_total - _exact_variance(k, r + h, agent_sd, judge_sd)) / (k * h)
        if abs(r - best) > 1e-3:
            assert (gain_rescore > gain_trial) == (r < best)


def test_the_old_rule_is_the_cost_rule_when_a_rollout_costs_r_judge_calls():
    rng = np.random.default_rng(3)
    result = _simulate(rng, 400, 3, 3, 0.2, 0.3)
    assert rescores_pay_more(result) == rescores_pay_more(result, cost_ratio=3.0)
    # a rollout far dearer than a judge call makes re-scores pay; far cheaper, trials
    assert rescores_pay_more(result, cost_ratio=1000.0) and not rescores_pay_more(result, cost_ratio=0.01)


def test_the_advice_says_uncertain_near_the_boundary_and_sure_far_from_it():
    from pytest_capevolve._stats.judge_noise import rescore_advice

    rng = np.random.default_rng(11)
    k, r, n = 3, 3, 60

    def per_task(agent_sd: float, judge_sd: float) -> tuple[np.ndarray, np.ndarray]:
        judge, within = [], []
        for _ in range(n):
            arms = [rng.normal(0, agent_sd, (k, 1)) + rng.normal(0, judge_sd, (k, r)) for _ in (0, 1)]
            (jc, wc), (jb, wb) = arm_within(arms[0]), arm_within(arms[1])
            judge.append(jc + jb)
            within.append(wc + wb)
        return np.array(judge), np.array(within)

    loud = rescore_advice(*per_task(0.02, 0.4), r, cost_ratio=10.0)
    assert loud.answer == "rescores" and loud.low is not None and loud.low > r
    quiet = rescore_advice(*per_task(0.4, 0.02), r, cost_ratio=10.0)
    assert quiet.answer == "trials" and "more trials" in quiet.text
    # r* = √(ρ)·σj/σa = 3 = r exactly: the interval straddles r
    edge = rescore_advice(*per_task(0.1, 0.3), r, cost_ratio=1.0)
    assert edge.answer == "uncertain" and edge.low is not None and edge.low < r < (edge.high or 0)
    assumed = rescore_advice(*per_task(0.1, 0.3), r)
    assert assumed.cost_ratio == r and "assumed" in assumed.text
