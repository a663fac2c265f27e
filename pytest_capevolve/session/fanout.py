"""Rollouts in flight within one process: ``--capevolve-concurrency K``.

Registered in every process that runs rollout items — the plain session, or each xdist worker —
when K > 1 or the adapter is async. pytest still runs items one at a time, in order, through
its normal hooks; before each item's protocol this plugin starts the rollouts of the next
items this process already owns, up to K (the running one included), off the main thread
(:mod:`..project.inflight`), and the item's ``runtest`` collects its own. So reports,
records, persistence, resume and crash safety are those of K = 1; only the waiting overlaps.

Which items a process owns:

- without xdist, ``session.items`` in order (pytest's own run loop);
- on an xdist worker, the item being run, the next one, and the indices the controller has
  queued on this worker. Under ``--dist worksteal`` the queue can be stolen from, so only the
  item being run and the next one (already taken off the queue) are started ahead.

Bounded to K: at most K rollouts are started and not yet collected. A rollout started ahead
whose item then never runs (skipped, deselected at run time, stolen, or the session stopped)
is dropped unreported: nothing is persisted for it, its key stays owed, and the next session
pays it again. ``dropped`` counts them (it goes to the controller in ``workeroutput``).
"""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from ..items import EvalContext, RolloutItem
from ..project.inflight import RolloutPool

WORKEROUTPUT_KEY = "capevolve_dropped_rollouts"


class Fanout:
    """Registered in each process that runs rollout items (see the module docstring)."""

    def __init__(self, config: pytest.Config, context: EvalContext, width: int) -> None:
        self.config = config
        self.context = context
        self.width = width
        self.dropped = 0
        self._index: dict[int, int] | None = None  # id(item) -> position in session.items
        self._abandoned: set[concurrent.futures.Future[Any]] = set()
        self._worker: Any = None  # xdist's worker plugin, found at the first item
        context.inflight = RolloutPool(context.runner)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        self._start_ahead(item, nextitem)
        return (yield)

    def _start_ahead(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        window = [i for i in self.owned_from(item, nextitem)[: self.width] if isinstance(i, RolloutItem)]
        started = self.context.started
        wanted = {i.nodeid for i in window}
        for nodeid in [n for n in started if n not in wanted]:
            # started ahead, but its item is no longer coming here: never reported, never persisted
            self.dropped += 1
            self._abandoned.add(started.pop(nodeid))
        for ahead in window:
            if ahead.nodeid not in started:
                self._wait_for_slot()
                ahead.start()

    def _wait_for_slot(self) -> None:
        """Dropped rollouts still running count toward K until they end."""
        while True:
            self._abandoned = {f for f in self._abandoned if not f.done()}
            if not self._abandoned or len(self.context.started) + len(self._abandoned) < self.width:
                return
            concurrent.futures.wait(self._abandoned, return_when=concurrent.futures.FIRST_COMPLETED)

    def owned_from(self, item: pytest.Item, nextitem: pytest.Item | None) -> list[pytest.Item]:
        """The items this process will run from ``item`` on, as far as it knows, in order."""
        session = item.session
        if self._worker is None and hasattr(self.config, "workerinput"):
            self._worker = _xdist_worker(self.config)
        worker = self._worker
        if worker is None:
            if self._index is None:
                self._index = {id(it): n for n, it in enumerate(session.items)}
            at = self._index.get(id(item))
            after = at + 1 if at is not None else None
            if after is not None and (session.items[after : after + 1] or [None])[0] is nextitem:
                return list(session.items[at : at + self.width])
            return [item] + ([nextitem] if nextitem is not None else [])  # someone else's run loop
        owned = [item] + ([nextitem] if nextitem is not None else [])
        if nextitem is None or self.config.getoption("dist", "load") == "worksteal":
            return owned
        queue = getattr(worker, "torun", None)
        if queue is None or not hasattr(queue, "lock"):
            return owned
        with queue.lock() as queued:
            indices = list(itertools.islice(queued, self.width))
        for index in indices:
            if not isinstance(index, int):
                break  # the shutdown marker: nothing after it runs here
            owned.append(session.items[index])
        return owned

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Rollouts started ahead whose items never ran are dropped (see the module docstring)."""
        self.dropped += len(self.context.started)
        self.context.started.clear()
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKEROUTPUT_KEY] = self.dropped

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.context.inflight is not None:
            self.context.inflight.close()


def _xdist_worker(config: pytest.Config) -> Any:
    """xdist's worker-side plugin (``xdist.remote.WorkerInteractor``) in a worker, else None."""
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor":
            return plugin
    return None


def register(config: pytest.Config, context: EvalContext, width: int) -> Fanout:
    fanout = Fanout(config, context, width)
    config.pluginmanager.register(fanout, "capevolve-fanout")
    return fanout
