"""Collectors and items: every owed rollout of the plan becomes one pytest item.

Collection runs wherever pytest collects (in-process, or on each xdist worker) and depends
only on the spec and the plan, so every worker collects the same items in the same order:
``capevolve.yaml::val::<task>[<tag>-t<k>]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .adapter import AdapterRunner, Task
from .candidate import content_hash
from .plan import EvalPlan, PlannedCandidate, RolloutKey
from .rollout import execute_rollout
from .spec import Spec

RECORD_PROPERTY = "capevolve_rollout"


@dataclass
class EvalContext:
    """What items need to run, built once per process in ``pytest_configure``."""

    spec: Spec
    plan: EvalPlan
    runner: AdapterRunner
    pool: dict[str, Task]
    _verified: dict[str, Path | str] = field(default_factory=dict)

    def candidate_dir(self, tag: str) -> Path:
        """The candidate's folder on this machine, after checking its bytes match the plan's.

        A worker on another machine evaluates its own copy; if that copy differs from what the
        controller registered, every rollout of the tag is refused rather than mislabelled.
        """
        if tag not in self._verified:
            planned = self.planned(tag)
            path = planned.resolve(self.spec.project_dir)
            try:
                actual = content_hash(path)
            except OSError as exc:
                actual = f"unreadable ({exc})"
            if actual != planned.content_hash:
                self._verified[tag] = (
                    f"candidate {tag!r} at {path} hashes to {actual}, not the registered "
                    f"{planned.content_hash}; it changed after the session started"
                )
            else:
                self._verified[tag] = path
        verified = self._verified[tag]
        if isinstance(verified, str):
            raise CandidateMismatch(verified)
        return verified

    def planned(self, tag: str) -> PlannedCandidate:
        return next(c for c in self.plan.candidates if c.tag == tag)


class CandidateMismatch(Exception):
    pass


class InfraError(Exception):
    """The rollout did not measure the agent: missing data, never a 0."""


class TaskFailed(Exception):
    """The agent scored below ``success_threshold`` on this task (not a session failure)."""


class SpecFile(pytest.File):
    """The project's ``capevolve.yaml``: one collector per split being evaluated."""

    def collect(self) -> Iterator[pytest.Collector]:
        plan = self.config.stash[CONTEXT_KEY].plan
        yield SplitCollector.from_parent(self, name=plan.split)


class SplitCollector(pytest.Collector):
    def collect(self) -> Iterator[pytest.Item]:
        plan = self.config.stash[CONTEXT_KEY].plan
        for key in plan.owed_keys():
            name = f"{key.task_id}[{key.tag}-t{key.trial}]"
            yield RolloutItem.from_parent(self, name=name, key=key)


class RolloutItem(pytest.Item):
    def __init__(self, *, key: RolloutKey, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key = key

    def runtest(self) -> None:
        context = self.config.stash[CONTEXT_KEY]
        plan, spec, key = context.plan, context.spec, self.key
        try:
            candidate_dir = context.candidate_dir(key.tag)
        except CandidateMismatch as exc:
            raise InfraError(str(exc)) from None
        record = execute_rollout(
            context.runner,
            context.pool[key.task_id],
            candidate_dir,
            run_id=plan.run_id,
            split=key.split,
            tag=key.tag,
            trial=key.trial,
            seed=plan.seed_for(key.trial),
            content_hash=context.planned(key.tag).content_hash,
            success_threshold=spec.success_threshold,
            timeout_s=spec.rollout_timeout_s,
        )
        self.user_properties.append((RECORD_PROPERTY, json.dumps(record, sort_keys=True)))
        if record["infra_error"]:
            raise InfraError(record["infra_error"])
        if not record["passed"]:
            raise TaskFailed(
                f"reward {record['reward']:.4g} < success_threshold {spec.success_threshold:g}"
                + (f": {record['feedback']}" if record["feedback"] else "")
            )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, InfraError):
            return f"INFRA ERROR (missing data, not a reward of 0): {excinfo.value}"
        if isinstance(excinfo.value, TaskFailed):
            return f"task failed: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.key.split}::{self.name}"


def record_from_report(report: Any) -> dict[str, Any] | None:
    """The rollout record a report carries, if any (controller side)."""
    for name, value in getattr(report, "user_properties", ()):
        if name == RECORD_PROPERTY:
            return dict(json.loads(value))
    return None


CONTEXT_KEY = pytest.StashKey[EvalContext]()
