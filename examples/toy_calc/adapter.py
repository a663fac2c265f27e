"""A deterministic stand-in agent for arithmetic questions, offline.

The "agent" always adds correctly; it multiplies correctly only when its prompt tells it to
multiply carefully, and subtracts correctly only when told to mind the sign. Same prompt, same
answers, every time: the candidate in ``candidates/careful`` fixes multiplication.
"""

from __future__ import annotations

from pathlib import Path

from pytest_capevolve import Rollout, Score, Task

OPS = {"+": lambda a, b: a + b, "*": lambda a, b: a * b, "-": lambda a, b: a - b}


class ToyCalcAdapter:
    def tasks(self, split: str) -> list[Task]:
        tasks = []
        for i in range(24):
            a, b = 3 + i, 7 + 2 * i
            op = "+*-"[i % 3]
            tasks.append(Task(id=f"q{i:02d}", input=f"{a} {op} {b}", target=OPS[op](a, b)))
        return tasks

    def run_target(self, task: Task, ctx: Path, *, seed: int) -> Rollout:
        prompt = (Path(ctx) / "prompt.md").read_text().lower()
        a, op, b = task.input.split()
        x, y = int(a), int(b)
        if op == "+":
            answer = x + y
        elif op == "*":
            answer = x * y if "multiply carefully" in prompt else x * y + 1
        else:
            answer = x - y if "mind the sign" in prompt else abs(x - y)
        return Rollout(task_id=task.id, output=answer, trace=[f"computed {task.input}"])

    def score(self, task: Task, rollout: Rollout) -> Score:
        ok = rollout.output == task.target
        return Score(
            reward=1.0 if ok else 0.0,
            feedback="correct" if ok else f"answered {rollout.output} to '{task.input}'",
        )
