"""One process's share of ``max_usd``, reserved before each rollout starts.

Rollouts start in processes that share nothing at run time, so the controller splits what
``max_usd`` leaves into one share per process (:func:`share_for`). In each, a rollout
**reserves** the dearest cost of its tag seen so far before it starts; a tag of unmeasured cost
starts only with nothing else in flight (a *probe*); a rollout that does not fit waits for those
in flight, and is skipped (still owed) if it still does not fit. So each process ends at most one
probe above its share. Pure bookkeeping with a lock; no pytest, no run dir."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

SKIP_REASON = "budget"
TOLERANCE_USD = 1e-9  # a nano-dollar: sums of cents are not exact in floats, and must not refuse


@dataclass(frozen=True)
class Headroom:
    """What ``max_usd`` leaves when the controller plans (None: no ceiling), the dearest
    rollout seen per tag, and how many processes will run rollouts."""

    usd: float | None = None
    cost_by_tag: dict[str, float] = field(default_factory=dict)
    workers: int = 1

    def to_wire(self) -> dict[str, Any]:
        return {"usd": self.usd, "cost_by_tag": self.cost_by_tag, "workers": self.workers}

    @classmethod
    def from_wire(cls, data: dict[str, Any] | None) -> Headroom:
        data = data or {}
        return cls(
            usd=None if data.get("usd") is None else float(data["usd"]),
            cost_by_tag={str(k): float(v) for k, v in (data.get("cost_by_tag") or {}).items()},
            workers=max(1, int(data.get("workers") or 1)),
        )


def share_for(headroom: Headroom) -> BudgetShare:
    """One process's share: an equal part of the $ left (the same for every worker)."""
    usd = None if headroom.usd is None else max(0.0, headroom.usd) / headroom.workers
    return BudgetShare(usd=usd, cost_by_tag=dict(headroom.cost_by_tag))


@dataclass
class BudgetShare:
    """One process's share (see the module docstring). ``usd`` None: uncapped."""

    usd: float | None = None
    cost_by_tag: dict[str, float] = field(default_factory=dict)
    spent_usd: float = 0.0
    reserved: dict[str, tuple[str, float | None]] = field(default_factory=dict)  # nodeid → (tag, estimate)
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def reserve(self, nodeid: str, tag: str, *, wait: bool) -> str | None:
        """Reserve ``nodeid``'s rollout: None when it may start, else why not. ``wait``: wait
        for rollouts in flight here to settle while they are what keeps it from fitting."""
        if self.usd is None:
            return None
        with self._cond:
            while True:
                reason = self._why_not(tag)
                if reason is None:
                    self.reserved[nodeid] = (tag, self.cost_by_tag.get(tag))
                    return None
                if not wait or not self.reserved:
                    return reason
                self._cond.wait()

    def release(self, nodeid: str) -> None:
        """A reservation whose rollout never started (it costs nothing)."""
        with self._cond:
            if self.reserved.pop(nodeid, None) is not None:
                self._cond.notify_all()

    def settle(self, nodeid: str, tag: str, cost: float) -> None:
        """A rollout ended at ``cost``: spent, and its tag's estimate raised to it if dearer."""
        with self._cond:
            self.reserved.pop(nodeid, None)
            self.spent_usd += cost
            self.cost_by_tag[tag] = max(cost, self.cost_by_tag.get(tag, 0.0))
            self._cond.notify_all()

    def _why_not(self, tag: str) -> str | None:
        assert self.usd is not None
        estimate = self.cost_by_tag.get(tag)
        estimates = [e for _, e in self.reserved.values()]
        if None in estimates:
            return "a rollout of unmeasured cost is in flight here"
        booked = self.spent_usd + sum(e for e in estimates if e is not None)
        if estimate is None:  # a probe: alone, and only while the share has room left
            if estimates or self.spent_usd >= self.usd - TOLERANCE_USD:
                return self._money_left(booked, "a first rollout of unmeasured cost")
            return None
        if booked + estimate > self.usd + TOLERANCE_USD:
            return self._money_left(booked, f"a rollout of {tag!r} (up to ${estimate:.4f})")
        return None

    def _money_left(self, booked: float, what: str) -> str:
        return (
            f"{what} does not fit this process's share of max_usd: ${booked:.4f} spent or "
            f"reserved of ${self.usd:.4f}"
        )
