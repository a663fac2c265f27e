"""A cap-evolve project and run dir in cap-evolve's own layout, for both halves of
test_import_cap_evolve: its spec, a stand-in adapter, a rollout file as cap-evolve's harness writes
it, and `capevolve import-cap-evolve --json`. The ``cap_evolve`` fixture in tests/conftest.py lays
them out with the real tau2 run's rewards."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_capevolve._cli.main import main

DATA = Path(__file__).resolve().parent / "data"

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


def _import(capsys, *args) -> dict:
    assert main(["import-cap-evolve", *map(str, args), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)
