"""The evaluation plan: which rollouts this session owes, decided once on the controller.

Plain JSON-able data, sent to xdist workers through ``workerinput``, so a remote worker needs no
run dir and every worker collects the same items."""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from functools import partial
from itertools import chain, repeat
from pathlib import Path
from typing import Any, NamedTuple

from .. import __version__
from .._project.blocks import first_trial
from ..exitcodes import UsageError

WORKERINPUT_KEY = "capevolve_plan"


@dataclass(frozen=True)
class PlannedCandidate:
    """A candidate of the plan: ``location`` its snapshot (what is evaluated), ``source`` the
    folder it was registered from (for a worker on an older copy of the project)."""

    tag: str
    location: str
    content_hash: str
    source: str = ""

    def resolve(self, project_dir: Path) -> Path:
        return _under(project_dir, self.location)

    def resolve_source(self, project_dir: Path) -> Path:
        return _under(project_dir, self.source or self.location)


def _under(project_dir: Path, stored: str) -> Path:
    path = Path(stored)
    return path if path.is_absolute() else (project_dir / path).resolve()


class RolloutKey(NamedTuple):
    """One planned rollout, equal to the plain ``(split, task_id, tag, trial)`` key."""

    split: str
    task_id: str
    tag: str
    trial: int  # the global trial index: block B's trial k is B · BLOCK_STRIDE + k


_as_key = partial(tuple.__new__, RolloutKey)  # a RolloutKey from a plain 4-tuple, in C


@dataclass
class EvalPlan:
    run_id: str
    split: str
    task_ids: list[str]
    num_trials: int
    base_seed: int
    candidates: list[PlannedCandidate]
    persisted: set[tuple[str, str, str, int]] | set[RolloutKey] = field(default_factory=set)
    # being paid right now by another live session (its claim): not owed here, waited for
    awaited: set[tuple[str, str, str, int]] | set[RolloutKey] = field(default_factory=set)
    block: int = 0  # the replicate block evaluated (--capevolve-block; 0 is the usual one)
    # --capevolve-sequential: the item order (the candidates' orders, interleaved; the best and the
    # null controls take it), each candidate's own task order (from its bytes and the run's secret),
    # this session's stop-marker token
    order: list[str] | None = None
    orders: dict[str, list[str]] | None = None
    sequential: str | None = None
    live: str | None = None  # this session's live-marker token (:mod:`.._store.sessions.markers`)
    pool_digest: str | None = None  # the controller's task pool, that every worker's must equal
    # what max_usd / max_metric_calls leave, split per process (:mod:`.._engine.budget_share`)
    budget: dict[str, Any] | None = None
    _keys: tuple[Any, list[RolloutKey]] | None = field(default=None, repr=False, compare=False)
    _owed: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def first_trial(self) -> int:
        return first_trial(self.block)

    def seed_for(self, trial: int) -> int:
        """Common random numbers: trial k runs with the same seed for every candidate."""
        return self.base_seed + trial

    def tags(self) -> set[str]:
        return {c.tag for c in self.candidates}

    def candidate(self, tag: str) -> PlannedCandidate:
        return next(c for c in self.candidates if c.tag == tag)

    def all_keys(self) -> list[RolloutKey]:
        """Every rollout in item order (task, trial, candidate): compared ones run close in time."""
        tasks = self.order or self.task_ids
        shape = (tuple(tasks), self.first_trial, self.num_trials, tuple(c.tag for c in self.candidates))
        if self._keys is None or self._keys[0] != shape:
            cells = [
                (cand.tag, trial)
                for trial in range(shape[1], shape[1] + shape[2])
                for cand in self.candidates
            ]
            # as columns zipped in C, each row made a RolloutKey at once (zip reuses its own tuple):
            # the same keys in the same order, no plain tuple kept per key
            width = len(cells)
            tags, trials = [tag for tag, _ in cells] * len(tasks), [trial for _, trial in cells] * len(tasks)
            task_column = list(chain.from_iterable(map(repeat, tasks, repeat(width))))
            self._keys = (shape, list(map(_as_key, zip(repeat(self.split), task_column, tags, trials))))
        return self._keys[1]

    def owed_keys(self) -> list[RolloutKey]:
        """The rollouts this session pays: neither persisted nor claimed by another session."""
        keys = self.all_keys()
        cached = self._owed
        if (
            cached is not None
            and cached[0] is keys
            and cached[1] is self.persisted
            and cached[2] is self.awaited
            and cached[3] == (len(self.persisted), len(self.awaited))
        ):
            return list(cached[4])
        skip = self.persisted | self.awaited if self.awaited else self.persisted  # read, never changed
        owed = [k for k in keys if k not in skip] if skip else list(keys)
        self._hold_owed(keys, owed)
        return list(owed)

    def _hold_owed(self, keys: list[RolloutKey], owed: list[RolloutKey]) -> None:
        """:meth:`owed_keys`' answer, kept while the keys and both sets (and their sizes) stay as they are."""
        self._owed = (keys, self.persisted, self.awaited, (len(self.persisted), len(self.awaited)), owed)

    def owes_nothing(self) -> None:
        """Planning found every key persisted or awaited (sets of :meth:`all_keys` that together hold as many
        keys as it has distinct ones): :meth:`owed_keys` is empty, known without looking each key up."""
        self._hold_owed(self.all_keys(), [])

    def to_wire(self) -> dict[str, Any]:
        data = asdict(replace(self, _keys=None, _owed=None))
        del data["_keys"], data["_owed"]
        data["persisted"] = sorted(list(k) for k in self.persisted)
        data["awaited"] = sorted(list(k) for k in self.awaited)
        return {**data, "version": __version__}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> EvalPlan:
        """What :meth:`to_wire` sent, through JSON: its lists of keys made sets of tuples again. A field
        an older controller did not send takes its default; one this worker's package does not know,
        or lacks and cannot default, is refused naming both versions (issue 38, trap 6)."""
        data, theirs = dict(data), data.get("version", "older than 0.1.0")
        data.pop("version", None)
        needed = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
        if odd := sorted(
            (set(data) - {f.name for f in fields(cls) if f.name[0] != "_"}) | (needed - set(data))
        ):
            raise UsageError(
                f"the controller's plan does not fit this worker ({', '.join(odd)}): the worker runs "
                f"pytest-capevolve {__version__}, the controller {theirs}; install the same version where "
                "the workers run (pip install on each --tx host) and start the session again"
            )
        for name in ("persisted", "awaited"):
            data[name] = {(s, t, g, int(k)) for s, t, g, k in data.get(name, ())}
        return cls(**{**data, "candidates": [PlannedCandidate(**c) for c in data["candidates"]]})
