"""The cyclic garbage collector during a capevolve session's run loop.

What is alive when the loop starts (modules, spec, plan, items) lives to the end, yet every full collection
walks it (~0.25 s of a 2000-rollout session): frozen for the loop, unless someone else froze the heap."""

from __future__ import annotations

import atexit
import functools
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


@functools.cache  # once per process
def _freeze_at_exit() -> None:
    """At exit, freeze what is left: the last collections would walk a heap the OS is about to take back
    (0.2–0.3 s after a 60k-rollout resume)."""
    atexit.register(gc.freeze)
