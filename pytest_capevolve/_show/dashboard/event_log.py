"""What the dashboard reads of ``events.jsonl``, folded line by line as it is read.

Read once per page by :func:`.model.collect`: rollout lines leave only a count, each val tag's
first place and a point of the spend series; every other event is kept whole."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..._store.log.event_kinds import DECISION, ROLLOUT
from ..._store.rundir import RunDir

GATE_SPLIT = "val"
MAX_SPEND_POINTS = 400  # a polyline past this many points draws nothing more a reader can see


@dataclass(frozen=True)
class SpendPoint:
    seconds: float  # since the run's first event
    rollouts: int
    usd: float


@dataclass
class Log:
    """The folded log: 60,000 rollouts held as events would outweigh everything else the page
    needs, so each leaves three numbers in arrays (the spend series)."""

    events: list[dict[str, Any]] = field(default_factory=list)  # every event but the rollouts
    numbers: list[int] = field(default_factory=list)  # each kept event's place in the log
    count: int = 0  # events read, rollouts included
    first_val_rollout: dict[str, int] = field(default_factory=dict)  # tag → place of its first
    start: float | None = None  # the first event's ts
    seconds: array = field(default_factory=lambda: array("d"))  # the spend series, unthinned
    rollouts: array = field(default_factory=lambda: array("q"))
    usd: array = field(default_factory=lambda: array("d"))
    _spent: tuple[int, float] = (0, 0.0)

    def add(self, event: dict[str, Any]) -> None:
        number = self.count
        self.count += 1
        if self.start is None:
            self.start = float(event.get("ts", 0.0))
        kind = event.get("kind")
        rollouts, usd = self._spent
        if kind == ROLLOUT:
            if event.get("split") == GATE_SPLIT:
                self.first_val_rollout.setdefault(str(event.get("tag")), number)
            rollouts, usd = rollouts + 1, usd + float(event.get("cost_usd") or 0.0)
        else:
            self.events.append(event)
            self.numbers.append(number)
            if kind != DECISION:
                return
            usd += float(event.get("optimizer_usd") or 0.0)
        self._spent = rollouts, usd
        self.seconds.append(max(0.0, float(event.get("ts", self.start)) - self.start))
        self.rollouts.append(rollouts)
        self.usd.append(usd)

    def spend(self, max_points: int = MAX_SPEND_POINTS) -> list[SpendPoint]:
        """Cumulative rollouts paid and $ (runner + optimizer) over wall-clock time since the
        run's first event; thinned to ``max_points``, always keeping the last point."""
        if self.start is None:
            return []
        total = len(self.seconds) + 1  # the origin, then a point per rollout and decision

        def point(i: int) -> SpendPoint:
            if i == 0:
                return SpendPoint(0.0, 0, 0.0)
            return SpendPoint(self.seconds[i - 1], self.rollouts[i - 1], self.usd[i - 1])

        if total <= max_points:
            return [point(i) for i in range(total)]
        step = total / (max_points - 1)
        return [point(int(i * step)) for i in range(max_points - 1)] + [point(total - 1)]


def read_log(rundir: RunDir) -> Log:
    """The log folded into a :class:`Log`; a damaged line raises the log's own error."""
    log = Log()
    if rundir.log.events_after(0, 0, log.add) is None:
        return folded(rundir.log.events())
    return log


def folded(events: Iterable[dict[str, Any]]) -> Log:
    """The events folded into a :class:`Log` in order."""
    log = Log()
    for event in events:
        log.add(event)
    return log
