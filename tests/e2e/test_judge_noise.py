"""A stochastic judge under capevolve: toy_calc (a deterministic agent) scored by a judge that
flips one verdict in five at its seed, re-scored three times per rollout; every verdict splits
Δ̄'s variance into the judge's share and the agent's."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from run_log import rollout_files

from pytest_capevolve._cli.main import main

JUDGE = """
import random


class Judged(ToyCalcAdapter):
    stochastic_score = True

    def score(self, task, rollout, *, seed):
        right = rollout.output == task.target
        flipped = random.Random(f"{task.id}|{seed}").random() < 0.2
        return Score(reward=float(right != flipped))
"""


def test_a_noisy_judge_is_re_scored_recorded_and_split_from_the_agent(example, projects, capevolve, capsys):
    project = example("toy_calc")
    projects.add_adapter(project, JUDGE, "adapter.py:Judged")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 2\njudge_rescores: 3")
    result = capevolve(project, "careful", gate=True, extra=["--capevolve-commit", "none"])
    assert result.ret in (0, 10), result.stdout.str()
    records = projects.rollout_records(project)
    val = [r for r in records.values() if r["split"] == "val"]
    assert val and all(len(r["judge"]["rewards"]) == 3 for r in val)
    for r in val:
        assert r["judge"]["seeds"] == [r["seed"] + 1_000_003 * j for j in range(3)]
        assert r["reward"] == sum(r["judge"]["rewards"]) / 3

    # the verdict says how much of Var(Δ̄) is the judge's, from the recorded re-scores
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "careful.json").read_text())
    split = verdict["judge_noise"]
    assert split["rescores"] == 3 and split["n_tasks"] == verdict["n_tasks"]
    assert 0 < split["judge_share"] <= 1 and split["var_judge"] + split["var_agent"] == pytest.approx(
        split["var_total"]
    )
    assert "more re-scores" in split["advice"]
    # the line prints the share it reads (a 0 % beside "judge noise dominates" once) and the
    # advice at the assumed cost ratio, with r*'s interval
    assert split["within_task_judge_share"] > 0.5
    share = f"{split['within_task_judge_share']:.0%}"
    result.stdout.fnmatch_lines(
        [
            f"careful: Var(Δ̄) is *% the judge*; within a task {share} the judge's: more re-scores*r* = *CI*assumed*"
        ]
    )


def test_every_verdict_carries_the_split_not_only_a_plain_gate_sessions(example, projects, capevolve, capsys):
    """A sequential gate's verdict and ``capevolve gate``'s re-derivation carry ``judge_noise``
    as a plain gate session's does, computed over the cells that verdict compared (its n tasks),
    because every verdict is made by ``Evidence.of_run`` (grow's too: see the unit test)."""
    project = example("toy_calc")
    projects.add_adapter(project, JUDGE, "adapter.py:Judged")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 2\njudge_rescores: 3")
    result = capevolve(
        project,
        "careful",
        gate=True,
        extra=["--capevolve-sequential", "--capevolve-null", "0", "--capevolve-commit", "none"],
    )
    assert result.ret in (0, 10), result.stdout.str()
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "careful.json").read_text())
    assert "sequential" in verdict["details"]
    split = verdict["judge_noise"]
    assert split["rescores"] == 3 and split["n_tasks"] == verdict["n_tasks"]
    assert split["var_total"] == pytest.approx(verdict["se"] ** 2)

    capsys.readouterr()
    # the fixed-n re-derivation of a sequential decision is a what-if (exit 14), never the decision
    assert main(["gate", "careful", "--project", str(project), "--json"]) == 14
    again = json.loads(capsys.readouterr().out)
    assert again["judge_noise"]["rescores"] == 3 and again["judge_noise"]["n_tasks"] == again["n_tasks"]
    assert again["judge_noise"]["var_total"] == pytest.approx(again["se"] ** 2)


def test_check_and_a_score_microcase_pass_the_judge_its_seed(example, projects, capsys):
    """The page's judge, ``score(self, task, rollout, *, seed)``, is called with its seed by
    ``capevolve check``'s re-score and by a ``score`` microcase, as by a session: neither fails
    it with a TypeError for a seed it was never given."""
    project = example("toy_calc")
    projects.add_adapter(project, JUDGE, "adapter.py:Judged")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 1\njudge_rescores: 3")
    (project / "microcases").mkdir()
    (project / "microcases" / "judge.yaml").write_text(
        "- id: judge-scores\n  cluster: judge\n  description: the judge gives a number\n"
        "  score: {task: q00, output: 10, reward: {min: 0, max: 1}}\n"
    )
    code = main(["check", str(project)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "score is declared stochastic" in out and "1 microcase(s) pass on the seed" in out


@pytest.mark.attack(
    "inputs",
    attack=(
        "`judge_rescores` changed mid-run (raised, or dropped back to 1), so new rewards average "
        "another number of re-scores than the records they are gated with"
    ),
    outcome=(
        "refused in one line before anything is paid: it is frozen in `spec.lock.yaml`; a new r is a new run"
    ),
)
def test_judge_rescores_is_frozen_with_the_run(example, projects, capevolve):
    """A run's records average r re-scores each: a later session with another r (edited in the
    spec, or dropped back to the default) is refused in one line before it pays, never mixing
    r = 3 means with r = 5 ones in one gate."""
    project = example("toy_calc")
    projects.add_adapter(project, JUDGE, "adapter.py:Judged")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 1\njudge_rescores: 3")
    assert capevolve(project, "careful").ret == 0
    paid = sorted(p.name for p in (projects.run_dir(project) / "rollouts").rglob("*.json"))

    projects.edit_spec(project, "judge_rescores: 3", "judge_rescores: 5")
    raised = capevolve(project, "careful", extra=["--capevolve-rerun"])
    assert raised.ret == 4
    lines = [line for line in raised.stderr.lines if "judge_rescores changed since run" in line]
    assert len(lines) == 1 and "(was 3)" in lines[0] and "--capevolve-new-run" in lines[0]

    projects.edit_spec(project, "judge_rescores: 5\n", "")  # back to the default, 1
    dropped = capevolve(project, "careful", extra=["--capevolve-rerun"])
    assert dropped.ret == 4
    dropped.stderr.fnmatch_lines(["*judge_rescores changed since run*(was 3)*"])
    assert sorted(p.name for p in (projects.run_dir(project) / "rollouts").rglob("*.json")) == paid
    # a new run is how another r is measured
    assert capevolve(project, "careful", extra=["--capevolve-new-run"]).ret == 0


@pytest.mark.attack(
    "inputs",
    attack=(
        "an LLM judge's re-scores rewritten to the same mean (`[1, 0, 0]` → `[1/3] × 3`: the reward, "
        "all a file was held to, unchanged; the judge made to look noiseless)"
    ),
    outcome=(
        "refused in one line naming the file: what the judge's split reads is held to its rollout "
        "event's sha256"
    ),
)
def test_re_scores_edited_to_the_same_mean_are_refused_not_split(example, projects, capevolve, capsys):
    """Attack: a record's re-scores rewritten to keep their mean ([1, 0, 0] → [1/3] × 3): the
    reward — all a file read back was held to — is unchanged, and the judge would look
    noiseless. Each file whose re-scores are read is held to its event's sha256: the verdict
    says the split is refused, naming the file, and gives none."""
    project = example("toy_calc")
    projects.add_adapter(project, JUDGE, "adapter.py:Judged")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 2\njudge_rescores: 3")
    assert capevolve(project, "careful", extra=["--capevolve-commit", "none"]).ret == 0
    run = projects.run_dir(project)
    capsys.readouterr()
    main(["gate", "careful", "--project", str(project), "--json"])
    assert "judge_share" in json.loads(capsys.readouterr().out)["judge_noise"]
    for path in rollout_files(run, "careful"):
        record = json.loads(path.read_text())
        if 0 < record["reward"] < 1:
            record["judge"]["rewards"] = [record["reward"]] * 3
            # at the file's size and mtime: a file whose stat changed is read again by the
            # gate's first read of its rows and quarantined for its bytes
            # (tests/e2e/test_attacks_rollout_bytes.py); this one reaches the judge's own check
            before = path.stat()
            text = json.dumps(record, sort_keys=True, separators=(",", ":"))
            assert len(text) < before.st_size
            path.write_text(text + " " * (before.st_size - len(text) - 1) + "\n")
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
            break
    else:
        pytest.fail("no record with a split judge to edit")
    main(["gate", "careful", "--project", str(project), "--json"])
    refused = json.loads(capsys.readouterr().out)["judge_noise"]
    assert refused == {
        "refused": f"{path.name}: its judge re-scores are not what its rollout event "
        "recorded (sha256): edited after it was written, so no judge/agent split is given"
    }


@pytest.mark.attack(
    "inputs",
    attack=(
        "a remote-style worker whose copy of the spec says another `judge_rescores` than the run froze "
        "(its records would average another r)"
    ),
    outcome=(
        "prevented: the controller makes each such record an infra error saying why (missing data, "
        "never a reward)"
    ),
)
def test_a_worker_whose_spec_re_scores_otherwise_is_refused(pytester, example, projects, capevolve):
    """Attack: a remote-style worker's copy of the project says ``judge_rescores: 5`` where the
    controller's run is frozen at 3. Its records would average 5 re-scores beside the
    controller's 3; each is an infra error saying why (missing data), never a reward."""
    project = example("toy_calc", dest="origin/toy_calc")
    projects.add_adapter(project, JUDGE, "adapter.py:Judged")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 1\njudge_rescores: 3")
    copy = pytester.path / "remote" / "toy_calc"
    shutil.copytree(project, copy)
    projects.edit_spec(copy, "judge_rescores: 3", "judge_rescores: 5")
    result = capevolve(project, "careful", extra=["--tx", f"1*popen//chdir={copy}", "-d"])
    records = projects.rollout_records(project)
    assert records and not [r for r in records.values() if r.get("judge") and len(r["judge"]["rewards"]) != 3]
    assert all(r["reward"] is None and "judge_rescores" in r["infra_error"] for r in records.values())
    assert result.ret == 12, result.stdout.str()
