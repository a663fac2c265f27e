"""The bad inputs of both halves of test_bad_inputs: adapters that break the adapter contract, and
CASES, every broken project with the message it gets (tests/e2e runs each as a session, exit 4;
tests/unit's `capevolve check` reads the same adapters)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

DUPLICATE_IDS = """
class DupAdapter(ToyCalcAdapter):
    def tasks(self, split):
        tasks = super().tasks(split)
        return tasks + tasks[:1]
"""
NO_TASKS = """
class EmptyAdapter(ToyCalcAdapter):
    def tasks(self, split):
        return []
"""
NO_SCORE = """
class NoScore:
    def tasks(self, split):
        return []
    def run_target(self, task, ctx, *, seed):
        return None
"""
TASKS_RAISE = """
class RaisingAdapter(ToyCalcAdapter):
    def tasks(self, split):
        raise RuntimeError("task database down")
"""
TASKS_NONE = """
class NoneAdapter(ToyCalcAdapter):
    def tasks(self, split):
        return None
"""
FLOAT_IDS = """
class FloatIdAdapter(ToyCalcAdapter):
    def tasks(self, split):
        return [Task(id=i + 0.5, input=t.input, target=t.target) for i, t in enumerate(super().tasks(split))]
"""

THREAD_SAFE_TEXT = """
class VagueAdapter(ToyCalcAdapter):
    thread_safe = "yes"
"""


def append_spec(project: Path, line: str) -> None:
    with (project / "capevolve.yaml").open("a") as handle:
        handle.write(line + "\n")


CASES = {
    "malformed-yaml": (
        lambda p, h: append_spec(p, "num_trials: [1, 2"),
        ["*capevolve.yaml (line *): malformed YAML*"],
    ),
    "unknown-key": (
        lambda p, h: append_spec(p, "num_trails: 3"),
        ["*unknown key 'num_trails' (did you mean 'num_trials'?)*"],
    ),
    "wrong-type": (
        lambda p, h: h.edit_spec(p, "num_trials: 1", "num_trials: five"),
        ["*key 'num_trials' must be a whole number ≥ 1, got 'five'*"],
    ),
    "out-of-range": (
        lambda p, h: append_spec(p, "success_threshold: 1.5"),
        ["*key 'success_threshold' must be a number in [[]0, 1], got 1.5*"],
    ),
    "missing-required": (
        lambda p, h: h.edit_spec(p, "adapter: adapter.py:ToyCalcAdapter", ""),
        ["*missing required key 'adapter'*"],
    ),
    "bad-gate-mode": (
        lambda p, h: append_spec(p, "gate_mode: vibes"),
        ["*key 'gate_mode' must be one of exact, paired, *got 'vibes'*"],
    ),
    "capability-missing": (
        lambda p, h: h.edit_spec(p, "capability_path: capability", "capability_path: nowhere"),
        ["*key 'capability_path' names */nowhere, which is not an existing folder*"],
    ),
    "adapter-file-missing": (
        lambda p, h: h.edit_spec(p, "adapter.py:ToyCalcAdapter", "agent.py:ToyCalcAdapter"),
        ["*key 'adapter' names */agent.py, which does not exist*"],
    ),
    "adapter-ref-malformed": (
        lambda p, h: h.edit_spec(p, "adapter.py:ToyCalcAdapter", "adapter.py"),
        ["*key 'adapter' must be 'file.py:ClassName'*"],
    ),
    "adapter-class-missing": (
        lambda p, h: h.edit_spec(p, "adapter.py:ToyCalcAdapter", "adapter.py:Nope"),
        ["*adapter */adapter.py has no class 'Nope' (classes there: *ToyCalcAdapter*"],
    ),
    "adapter-method-missing": (
        lambda p, h: h.add_adapter(p, NO_SCORE, "adapter.py:NoScore"),
        ["*lacks required method(s) score*"],
    ),
    "duplicate-task-ids": (
        lambda p, h: h.add_adapter(p, DUPLICATE_IDS, "adapter.py:DupAdapter"),
        ["*returned the task id 'q00' twice; ids must be unique*"],
    ),
    "no-tasks": (
        lambda p, h: h.add_adapter(p, NO_TASKS, "adapter.py:EmptyAdapter"),
        ["*returned no tasks; there is nothing to evaluate*"],
    ),
    "ratios-sum": (
        lambda p, h: h.edit_spec(p, "split_test: 0.25", "split_test: 0.5"),
        ["*split_train + split_val + split_test must sum to 1*"],
    ),
    "spec-not-mapping": (
        lambda p, h: (p / "capevolve.yaml").write_text("- a\n- b\n"),
        ["*the spec must be a mapping*"],
    ),
    "split-ids-unknown": (
        lambda p, h: (
            (p / "ids.json").write_text(json.dumps({"val": ["q00", "zz"]})),
            append_spec(p, "split_ids_file: ids.json"),
        ),
        ["*split 'val' names task ids the adapter does not have: 'zz'*"],
    ),
    "duplicate-key": (
        lambda p, h: append_spec(p, "num_trials: 2"),
        ["*capevolve.yaml (line 10, column 1): malformed YAML: duplicate key 'num_trials' (keep one)*"],
    ),
    "plan-too-large": (
        lambda p, h: h.edit_spec(p, "num_trials: 1", "num_trials: 1000000000"),
        ["*12 val tasks × 1000000000 trials × 1 candidate(s) = 12000000000 rollouts, more than one*"],
    ),
    "tasks-raises": (
        lambda p, h: h.add_adapter(p, TASKS_RAISE, "adapter.py:RaisingAdapter"),
        ["*adapter adapter.py:RaisingAdapter: tasks('all') raised RuntimeError: task database down*"],
    ),
    "tasks-not-a-list": (
        lambda p, h: h.add_adapter(p, TASKS_NONE, "adapter.py:NoneAdapter"),
        ["*adapter adapter.py:NoneAdapter: tasks('all') must return a list of tasks, got NoneType None*"],
    ),
    "task-id-float": (
        lambda p, h: h.add_adapter(p, FLOAT_IDS, "adapter.py:FloatIdAdapter"),
        ["*returned a task whose id 0.5 is a float; a task id is a string (or a whole number, read as one)*"],
    ),
    "thread-safe-not-a-bool": (
        lambda p, h: h.add_adapter(p, THREAD_SAFE_TEXT, "adapter.py:VagueAdapter"),
        ["*adapter VagueAdapter: thread_safe must be True or False, got 'yes'*"],
    ),
    "concurrency-zero": (
        lambda p, h: append_spec(p, "concurrency: 0"),
        ["*key 'concurrency' must be a whole number ≥ 1, got 0*"],
    ),
    "no-project": (
        lambda p, h: shutil.rmtree(p),
        ["*no such spec file; --capevolve-run takes a project folder*"],
    ),
    "no-spec-in-folder": (
        lambda p, h: (p / "capevolve.yaml").unlink(),
        ["*no capevolve.yaml in *toy_calc; a project is a folder holding one*"],
    ),
}
