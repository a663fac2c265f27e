"""The evaluation plan: which rollouts this session owes, decided once on the controller.

The plan is plain JSON-able data. Without xdist it is used in-process; with xdist it travels
to every worker through ``pytest_configure_node`` → ``workerinput``, so a remote worker needs
no copy of the run dir and every worker collects exactly the same items.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..project.blocks import first_trial

WORKERINPUT_KEY = "capevolve_plan"


@dataclass(frozen=True)
class PlannedCandidate:
    tag: str
    location: str  # relative to the project folder when inside it, else absolute
    content_hash: str

    def resolve(self, project_dir: Path) -> Path:
        path = Path(self.location)
        return path if path.is_absolute() else (project_dir / path).resolve()


@dataclass(frozen=True, slots=True)  # one per rollout, held to the end of the session
class RolloutKey:
    split: str
    task_id: str
    tag: str
    trial: int  # the global trial index: block B's trial k is B · BLOCK_STRIDE + k


@dataclass
class EvalPlan:
    run_id: str
    split: str
    task_ids: list[str]
    num_trials: int
    base_seed: int
    candidates: list[PlannedCandidate]
    persisted: set[tuple[str, str, str, int]] = field(default_factory=set)
    # being paid right now by another live session (its claim): not owed here, waited for
    awaited: set[tuple[str, str, str, int]] = field(default_factory=set)
    block: int = 0  # the replicate block evaluated (--capevolve-block; 0 is the usual one)
    # --capevolve-sequential: the seeded task order and this session's stop-marker token
    order: list[str] | None = None
    sequential: str | None = None
    _keys: tuple[Any, list[RolloutKey]] | None = field(default=None, repr=False, compare=False)

    @property
    def first_trial(self) -> int:
        return first_trial(self.block)

    def seed_for(self, trial: int) -> int:
        """Common random numbers: trial k runs with the same seed for every candidate."""
        return self.base_seed + trial

    def tags(self) -> set[str]:
        return {c.tag for c in self.candidates}

    def all_keys(self) -> list[RolloutKey]:
        """Every rollout of the plan in item order: task, then trial, then candidate, so the
        rollouts that get compared run close together in time (a sequential gate: tasks in its
        seeded order, both arms' trials of a task before the next task). Built once per shape:
        a resume asks for them several times."""
        tasks = self.order or self.task_ids
        shape = (tuple(tasks), self.first_trial, self.num_trials, tuple(c.tag for c in self.candidates))
        if self._keys is None or self._keys[0] != shape:
            keys = [
                RolloutKey(self.split, task_id, cand.tag, trial)
                for task_id in tasks
                for trial in range(self.first_trial, self.first_trial + self.num_trials)
                for cand in self.candidates
            ]
            self._keys = (shape, keys)
        return self._keys[1]

    def owed_keys(self) -> list[RolloutKey]:
        """The rollouts this session pays: neither persisted nor claimed by another session."""
        skip = self.persisted | self.awaited
        return [k for k in self.all_keys() if (k.split, k.task_id, k.tag, k.trial) not in skip]

    def to_wire(self) -> dict[str, Any]:
        data = asdict(replace(self, _keys=None))
        del data["_keys"]
        data["persisted"] = sorted(list(k) for k in self.persisted)
        data["awaited"] = sorted(list(k) for k in self.awaited)
        return data

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> EvalPlan:
        return cls(
            run_id=data["run_id"],
            split=data["split"],
            task_ids=list(data["task_ids"]),
            num_trials=int(data["num_trials"]),
            base_seed=int(data["base_seed"]),
            candidates=[PlannedCandidate(**c) for c in data["candidates"]],
            persisted={(s, t, g, int(k)) for s, t, g, k in data["persisted"]},
            awaited={(s, t, g, int(k)) for s, t, g, k in data.get("awaited", [])},
            block=int(data.get("block", 0)),
            order=data.get("order"),
            sequential=data.get("sequential"),
        )
