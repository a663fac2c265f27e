"""What every session kind is: the :class:`SessionKind` protocol and what its ``start`` returns.

Controller only; what the kinds (and a project's own, through ``pytest_capevolve_make_session``) build on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import pytest

from ..._project.candidate import SEED_TAG

if TYPE_CHECKING:
    from ..._decide.verdict import Verdict
    from ..._project.spec import Spec
    from ..._store.readers.evidence import ByTag
    from ..._store.rollouts.record import RolloutRecord
    from ..._store.rundir import RunDir
    from ..outcome import Outcome
    from ..persistence import Persistence
    from ..planning import Planned


# The harness as it is now, before any kind starts: a new run locks it only after planning, which
# compares it with the project's other runs' locks.
HARNESS_NOW = pytest.StashKey[dict[str, str]]()
# The pool's content keys (:mod:`..._store.memory.task_keys`), made only when asked: a run that has
# its keys (every resume) would encode and hash 10,000 tasks for nothing.
TASK_KEYS_NOW = pytest.StashKey[Callable[[], dict[str, str]]]()
# why the session's α schedule is the loop's default (:mod:`..._policy.alpha.gate_settings`), or None
SCHEDULE_WHY = pytest.StashKey[str | None]()


class Role(Protocol):
    """The plugin that concludes a session, run by :class:`..outcome.SessionEnd` after the run loop."""

    def conclude(self) -> Outcome: ...


@dataclass
class Started:
    role: Role
    planned: Planned
    persistence: Persistence
    rundir: RunDir
    persisted: Callable[[], list[RolloutRecord]]  # after Ctrl-C: what is on disk for the table
    plugins: list[tuple[str, object]] = field(default_factory=list)  # registered after persistence
    # after Ctrl-C: the verdicts as they stand (a sequential gate), or None (no verdicts)
    interrupted_verdicts: Callable[[ByTag], list[Verdict]] | None = None


class SessionKind(Protocol):
    """One kind of capevolve session: whether the options ask for it, and how it starts."""

    name: str

    def asked(self, config: pytest.Config, split: str) -> bool:
        """Whether the options ask for this kind (``pytest.UsageError`` for contradicting flags)."""
        ...

    def start(self, config: pytest.Config, spec: Spec, pool_ids: list[str], split: str) -> Started:
        """Plan the session (under the project's and run's locks) and build its role."""
        ...


def indexed(rundir: RunDir, planned: Planned) -> Callable[[], list[RolloutRecord]]:
    plan = planned.plan
    return lambda: rundir.rollouts.indexed_rollouts(plan.split, plan.tags() | {SEED_TAG}, plan.block)
