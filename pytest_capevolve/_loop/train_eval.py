"""``capevolve measure --train yes|no|auto``: whether the measurement pays a train evaluation.

Train is never gated, so its row is for the report only. ``auto`` pays it when the run has a
train split that is not val's tasks again and the seed or best lacks train rollouts; ``yes``
pays whatever is missing; ``no`` (the default) nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from .._policy.stop.afford import missing_rollouts
from .._project.candidate import SEED_TAG
from .._project.spec import Spec
from .._store.readers.evidence import index_records
from .._store.rundir import RunDir
from .launch import run_attached, run_captured, session_command


@dataclass(frozen=True)
class TrainPlan:
    """What ``--train`` pays: the rollouts still missing (0: nothing to pay) and why."""

    missing: int
    note: str

    @property
    def pays(self) -> bool:
        return self.missing > 0


def missing_on(spec: Spec, rundir: RunDir, split: str, tags: list[str]) -> int:
    """The rollouts ``tags`` still lack on ``split``: every task, every trial."""
    ids = list((rundir.splits() or {}).get(split, []))
    records = index_records(rundir.rollouts.indexed_rollouts(split, tags))
    return missing_rollouts(records, tags, ids, spec.num_trials)


def plan_train(spec: Spec, rundir: RunDir, mode: str) -> TrainPlan:
    """Whether ``mode`` pays the train evaluation of the seed and the best, and the reason."""
    splits = rundir.splits() or {}
    train, val = list(splits.get("train", [])), list(splits.get("val", []))
    if not train:
        return TrainPlan(0, "empty: this split has no tasks")
    best = rundir.state.best()
    missing = missing_on(spec, rundir, "train", [SEED_TAG] if best == SEED_TAG else [SEED_TAG, best])
    if missing == 0:
        return TrainPlan(0, "evaluated")
    if mode == "no":
        return TrainPlan(
            0, f"not evaluated: measure --train no (the default); --train auto pays its {missing} rollouts"
        )
    if mode == "auto" and set(train) == set(val):
        return TrainPlan(0, "not evaluated: train holds val's tasks, so its numbers would be a copy of val's")
    return TrainPlan(missing, f"evaluating: {missing} train rollouts missing")


def evaluate_train(spec: Spec, rundir: RunDir, *, workers: int, quiet_to: TextIO | None) -> int:
    """One plain session on train for the best (and the seed); its exit code."""
    extra = ["--capevolve-split", "train"]
    if rundir.state.best() != SEED_TAG:
        extra += ["--capevolve-candidate", str(spec.capability_path), "--capevolve-tag", SEED_TAG]
    command = session_command(spec.path, run_id=rundir.run_id, workers=workers, extra=extra)
    if quiet_to is None:
        return run_attached(command, spec.project_dir)
    done = run_captured(command, spec.project_dir)
    quiet_to.write(done.stdout + done.stderr)
    return done.returncode
