"""The cyclic garbage collector during a capevolve session's run loop.

Registered in every process that runs a capevolve session (the plain session, the xdist
controller and each worker). Everything alive when the run loop starts — imported modules
(numpy, scipy, pytest), the spec, the plan, the collected items — stays alive until the
session ends, yet every full collection during the loop (and at its end: the conclusion, the
dashboard) walks all of it again: measured at ~0.25 s of a 2000-rollout session. So that heap
is frozen (``gc.freeze``: moved out of the collector's generations) for the loop, and given back
(``gc.unfreeze``) when pytest cleans up its config, so nothing is kept longer than without it — which
matters when a session runs inside another process (pytester). Garbage made during the loop is
collected as usual. A process that froze its own heap before us is left as it is.
"""

from __future__ import annotations

import atexit
import gc

import pytest


class FrozenStartupHeap:
    def __init__(self) -> None:
        self.frozen = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            self.frozen = True

    def unfreeze(self) -> None:
        if self.frozen:
            gc.unfreeze()
            self.frozen = False


def register(config: pytest.Config) -> None:
    heap = FrozenStartupHeap()
    config.pluginmanager.register(heap, "capevolve-heap")
    # Given back as the config is cleaned up, not at unconfigure: pytest collects garbage twice
    # when it unconfigures (its unraisable-exception plugin: in its unconfigure, then in a
    # cleanup it added after this one, which runs first), and with the heap still frozen those
    # collections skip the start-up heap (~0.1 s at 60,000 rollouts planned).
    config.add_cleanup(heap.unfreeze)
    _freeze_at_exit()


def _freeze_at_exit() -> None:
    """When the process exits, freeze what is left: the interpreter's last collections would
    walk a heap the OS is about to take back whole (0.2–0.3 s after a 60k-rollout resume; a
    cycle left uncollected then costs nothing). Once per process: pytester runs many sessions in
    one."""
    global _AT_EXIT
    if not _AT_EXIT:
        atexit.register(gc.freeze)
        _AT_EXIT = True


_AT_EXIT = False
