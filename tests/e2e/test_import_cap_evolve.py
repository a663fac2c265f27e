"""`capevolve import-cap-evolve` on a cap-evolve project and run dir in cap-evolve's own layout,
built from the real tau2 run in tests/data (val: shared_data; test: its sealed FINAL scores)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main

DATA = Path(__file__).resolve().parents[1] / "data"

SPEC = """\
# AGENT-OPTIMIZE spec v4 — tau2-bench airline on gpt-oss-120b, num_trials: 5.
capabilities: [system-prompt, tools]
capability_path: seed_capability
actions: [edit]
capability_sources: [seed_capability/reference/data_model.py]
orchestration_mode: agent
algorithm_skill: agent-optimize
optimizer_skill: claude-code
optimizer_model: aws/claude-opus-5
optimizer_max_turns: 120
optimizer_usd_per_iter: 6.0
target_model: aws/gpt-oss-120b
dataset_source: adapter
split_seed: 0
split_train: 0.52
split_val: 0.24
split_test: 0.24
split_ids_file: agentopt_split.json
num_trials: 5
gate_mode: paired
gate_k_se: 0.2
max_iterations: 8
stall: 5
max_metric_calls: 600
max_usd: 55.0
max_optimizer_usd: 40.0
stop_condition: "reach val mean >= 0.95, or stop after 600 rollouts or 300 minutes or 5 rejects in a row; don't regress task 0"
store: copy
"""

ADAPTER = '''\
"""tau2 airline, cap-evolve layout: a stand-in runner (no tau2, no model) for the import test."""

from pathlib import Path

from cap_evolve import CapabilityAdapter, Rollout, Score, Task

import model_config  # beside this file, as cap-evolve's templates do


class Adapter(CapabilityAdapter):
    def tasks(self, split):
        return [Task(id=str(i), input={"task_index": i}) for i in range(50)]

    def run_target(self, task, ctx, *, seed=0):
        policy = (Path(ctx) / "policy" / "policy.md").read_text(encoding="utf-8")
        return Rollout(task_id=task.id, output=f"{len(policy)}:{task.id}:{seed}", metadata={"model": model_config.MODEL})

    def score(self, task, rollout):
        ok = int(str(rollout.output).split(":")[2]) % 2 == 0
        return Score(task_id=task.id, reward=1.0 if ok else 0.0, feedback="stand-in")
'''


def _rollout(tid: str, trial_reward: float, feedback: str, task_input=None) -> dict:
    """A rollout file as cap-evolve's harness writes it: {input, rollout, score}."""
    return {
        "input": task_input or {"task_index": int(tid)},
        "rollout": {
            "task_id": tid,
            "output": "",
            "trace": None,
            "tool_calls": [],
            "cost_usd": 0.0,
            "tokens": 0,
            "error": None,
            "metadata": {},
        },
        "score": {
            "task_id": tid,
            "reward": trial_reward,
            "feedback": feedback,
            "n": 1,
            "stderr": 0.0,
            "trial_rewards": [],
            "raw": {},
            "metrics": [],
        },
    }


@pytest.fixture
def cap_evolve(tmp_path, shared_data):
    """(cap-evolve's project folder, its run dir): ``.capevolve/project`` and
    ``.capevolve/run_<ts>`` as cap-evolve lays them out, holding the real run's rewards."""
    base = tmp_path / "cap-evolve-repo" / ".capevolve"
    project = base / "project"
    (project / "adapters").mkdir(parents=True)
    (project / "capevolve.yaml").write_text(SPEC)
    (project / "adapters" / "adapter.py").write_text(ADAPTER)
    (project / "adapters" / "model_config.py").write_text('MODEL = "aws/gpt-oss-120b"\n')
    seed = project / "seed_capability"
    (seed / "policy").mkdir(parents=True)
    (seed / "policy" / "policy.md").write_text("# Airline agent policy\nVerify the user id first.\n")
    (seed / "tools").mkdir()
    (seed / "tools" / "tools.py").write_text("def calculate(expression):\n    return expression\n")
    val_ids = sorted(shared_data["seed"], key=int)
    test_data = json.loads((DATA / "cap-evolve-v4-test-per-task.json").read_text())["FINAL"]
    test_ids = sorted(test_data, key=int)
    train_ids = [str(i) for i in range(50) if str(i) not in set(val_ids) | set(test_ids)]
    (project / "agentopt_split.json").write_text(
        json.dumps({"train": train_ids, "val": val_ids, "test": test_ids})
    )

    run = base / "run_20260816_101112"
    (run / "rollouts" / "val").mkdir(parents=True)
    (run / "rollouts" / "test").mkdir(parents=True)
    (run / "splits.json").write_text(
        json.dumps({"train": train_ids, "val": val_ids, "test": test_ids, "seed": 0, "test_used": True})
    )
    (run / "state.json").write_text(
        json.dumps(
            {
                "best_id": "seed",
                "budget": {
                    "max_iterations": 8,
                    "max_metric_calls": 600,
                    "max_usd": 55.0,
                    "stall": 5,
                    "max_optimizer_usd": 40.0,
                },
                "spent": {"iterations": 5, "metric_calls": 550, "usd": 0.0, "stall": 5},
            }
        )
    )
    for tag, per_task in shared_data.items():
        snapshot = run / "candidates" / tag
        shutil.copytree(seed, snapshot)
        if tag.startswith(("cA", "cB")):  # the two real edits (the nulls are byte-identical copies)
            with open(snapshot / "policy" / "policy.md", "a") as handle:
                handle.write(f"Edit {tag}.\n")
        for tid, row in per_task.items():
            for k, reward in enumerate(row["trials"]):
                path = run / "rollouts" / "val" / f"{tid}__{tag}__t{k}.json"
                path.write_text(json.dumps(_rollout(tid, reward, row["feedback"])))
    for tid, row in test_data.items():
        for k, reward in enumerate(row["trials"]):
            path = run / "rollouts" / "test" / f"{tid}__FINAL__t{k}.json"
            path.write_text(json.dumps(_rollout(tid, reward, "")))
    (run / "events.jsonl").write_text(
        json.dumps({"t": 0, "kind": "splits", "train": 26, "val": 12, "test": 12}) + "\n"
    )
    return project, run


def _import(capsys, *args) -> dict:
    assert main(["import-cap-evolve", *map(str, args), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_a_session_on_the_imported_run_pays_nothing_already_paid(cap_evolve, tmp_path, capsys, capevolve):
    project, run = cap_evolve
    dest = tmp_path / "here"
    _import(capsys, project, dest, "--run", run)
    result = capevolve(dest, extra=["-q"])
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["seed *val*12*5*0.567*", "rollouts: 0 paid, 60 reused*"])
