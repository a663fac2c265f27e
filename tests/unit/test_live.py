"""How a rollout makes its candidate live (AdapterRunner.live, in run_target_here): the adapter's
own ``live()`` entered around run_target and told what it raised, ``apply()`` called with the
folder before it, the folder itself as the context otherwise."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_capevolve import Rollout, Task
from pytest_capevolve._engine.runner import AdapterRunner, run_target_here

TASK = Task(id="t", input="ok", target=None)


def _run(adapter: Any, task: Task = TASK) -> Any:
    return run_target_here(AdapterRunner(adapter), task, Path("cand"), seed=0, split="val")


class Live:
    def __init__(self) -> None:
        self.said: list[object] = []

    @contextlib.contextmanager
    def live(self, folder: Path) -> Iterator[str]:
        self.said.append(("enter", folder))
        try:
            yield f"ctx of {folder}"
        except ValueError as exc:
            self.said.append(("raised", str(exc)))
            raise
        self.said.append("exit")

    def run_target(self, task: Task, ctx: Any, *, seed: int) -> Rollout:
        self.said.append(("run", ctx))
        if task.input == "raise":
            raise ValueError("boom")
        return Rollout(task_id=task.id, output=ctx)


class Apply:
    def __init__(self) -> None:
        self.said: list[object] = []

    def apply(self, folder: Path) -> None:
        self.said.append(("apply", folder))

    def run_target(self, task: Task, ctx: Any, *, seed: int) -> Rollout:
        self.said.append(("run", ctx))
        return Rollout(task_id=task.id)


class Bare:
    def run_target(self, task: Task, ctx: Any, *, seed: int) -> Rollout:
        return Rollout(task_id=task.id, output=ctx)


def test_the_adapters_live_is_entered_around_run_target_and_told_what_it_raised() -> None:
    adapter = Live()
    assert _run(adapter).rollout.output == "ctx of cand"
    assert adapter.said == [("enter", Path("cand")), ("run", "ctx of cand"), "exit"]
    adapter.said.clear()
    scored = _run(adapter, Task(id="t", input="raise", target=None))
    assert scored.rollout is None and scored.infra_error == "run_target raised ValueError: boom"
    assert adapter.said == [("enter", Path("cand")), ("run", "ctx of cand"), ("raised", "boom")]


def test_apply_is_called_with_the_folder_before_run_target_which_gets_the_folder() -> None:
    adapter = Apply()
    _run(adapter)
    assert adapter.said == [("apply", Path("cand")), ("run", Path("cand"))]


def test_without_live_or_apply_run_target_gets_the_folder() -> None:
    assert _run(Bare()).rollout.output == Path("cand")
