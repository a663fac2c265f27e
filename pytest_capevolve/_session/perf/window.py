"""xdist scheduling for the sequential gate: a bounded window of rollouts in flight per worker.

Controller only, under ``--dist load``. A worker holds at most ``window`` items, and none is sent more than
``window × workers`` places past the oldest outstanding one, so every rollout paid after a decision lies
within that many items of it (the stop marker stops the rest)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any


def window_scheduler(
    config: Any,
    log: Any,
    window: int,
    *,
    lead_limit: bool = True,
    not_needed: Callable[[str], bool] | None = None,
    stops: Callable[[], int] = lambda: 0,
) -> Any:
    """``lead_limit=False``: the per-worker window only (bounding what a stopped controller re-pays); the
    lead rule is the sequential gate's. ``not_needed(nodeid)``: an item not yet sent that the gate no longer
    needs is never sent (a worker on a copy of the project never sees the stop marker); ``stops()``: how many
    tags have stopped, which only grows."""
    from xdist.scheduler import LoadScheduling  # only when xdist runs this session

    class WindowScheduling(LoadScheduling):  # type: ignore[misc]
        _looked = (0, -1)  # (stops, len(pending)) when pending was last looked at

        def schedule(self) -> None:
            self.maxschedchunk = window  # the first batch per worker: at most one window
            super().schedule()

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            if not lead_limit:
                super().mark_test_complete(node, item_index, duration)
                return
            self.node2pending[node].remove(item_index)
            # the oldest outstanding item may have moved: a worker idle at the lead limit may
            # now be sent more, so every worker is looked at, this one first
            for each in [node, *(n for n in self.node2pending if n is not node)]:
                self.check_schedule(each, duration=duration if each is node else 0)

        def check_schedule(self, node: Any, duration: float = 0) -> None:
            if node.shutting_down:
                return
            # looked at again only when a tag stopped or pending grew back (a dead worker's items):
            # every completion would otherwise scan all of pending, quadratic in a large val
            if not_needed is not None and (seen := (stops(), len(self.pending))) != self._looked:
                if seen[0] != self._looked[0] or seen[1] > self._looked[1]:
                    self.pending[:] = [i for i in self.pending if not not_needed(self.collection[i])]
                self._looked = (seen[0], len(self.pending))
            if not self.pending:
                node.shutdown()
                return
            queued = len(self.node2pending[node])
            if queued >= window:
                return
            if not lead_limit:
                self._send_tests(node, min(window - queued, len(self.pending)))
                return
            outstanding = [i for held in self.node2pending.values() for i in held]
            limit = min(outstanding, default=min(self.pending)) + window * len(self.node2pending)
            # in collection order: the seeded order of val
            sendable = sum(1 for _ in itertools.takewhile(lambda index: index < limit, self.pending))
            if not outstanding:  # nothing in flight anywhere: the lead limit cannot be waited on
                sendable = max(sendable, 1)
            if sendable:
                self._send_tests(node, min(window - queued, sendable))

    return WindowScheduling(config, log)
