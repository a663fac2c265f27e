"""xdist scheduling for the sequential gate: a bounded window of rollouts in flight per worker.

Controller only, with ``-n``/``--dist load``. xdist's load scheduler hands each worker a
quarter of its share at once and refills up to half, so a worker may run many tasks past the
point where the gate decided before the controller's stop marker can reach it. This scheduler
is the same, except that a worker never holds more than ``window`` items (one task's rollouts
of every tag, at least two): the workers still fan out, and the rollouts paid after a decision
are bounded by the window instead of by the collection's size.
"""

from __future__ import annotations

from typing import Any


def window_scheduler(config: Any, log: Any, window: int) -> Any:
    from xdist.scheduler import LoadScheduling  # only when xdist runs this session

    class WindowScheduling(LoadScheduling):  # type: ignore[misc]
        def schedule(self) -> None:
            self.maxschedchunk = window  # the first batch per worker: at most one window
            super().schedule()

        def check_schedule(self, node: Any, duration: float = 0) -> None:
            if node.shutting_down:
                return
            if not self.pending:
                node.shutdown()
                return
            queued = len(self.node2pending[node])
            if queued < window:
                self._send_tests(node, window - queued)

    return WindowScheduling(config, log)
