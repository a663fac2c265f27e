"""xdist scheduling for the sequential gate: a bounded window of rollouts in flight per worker.

Controller only, with ``-n``/``--dist load``. xdist's load scheduler hands each worker a
quarter of its share at once and refills up to half, so a worker may run many tasks past the
point where the gate decided before the controller's stop marker can reach it. This scheduler
is the same, except that a worker never holds more than ``window`` items (one task's rollouts
of every tag, at least two), and no item is sent more than ``window × workers`` places past the
oldest item still outstanding. The second rule is what makes the bound hold on a loaded
machine: without it a worker that is descheduled while holding an early task lets the others
run on through later tasks, all paid before the gate can decide on the early one. With it, every
rollout paid before a decision lies within ``window × workers`` items of the task that decided,
whatever the timing, and after the decision the stop marker (written before the controller sends
anything more) keeps the workers from starting another.
"""

from __future__ import annotations

from typing import Any


def window_scheduler(config: Any, log: Any, window: int, *, lead_limit: bool = True) -> Any:
    """``lead_limit=False``: the per-worker window only (what bounds the rollouts a stopped
    controller re-pays, :func:`..persistence.record_window`); the lead rule is the sequential
    gate's, whose bound it makes hold on a loaded machine."""
    from xdist.scheduler import LoadScheduling  # only when xdist runs this session

    class WindowScheduling(LoadScheduling):  # type: ignore[misc]
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
            sendable = 0
            for index in self.pending:  # in collection order: the seeded order of val
                if index >= limit:
                    break
                sendable += 1
            if not outstanding:  # nothing in flight anywhere: the lead limit cannot be waited on
                sendable = max(sendable, 1)
            if sendable:
                self._send_tests(node, min(window - queued, sendable))

    return WindowScheduling(config, log)
