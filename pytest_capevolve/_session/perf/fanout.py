"""Rollouts in flight within one process: ``--capevolve-concurrency K`` (or an async adapter), and at
concurrency 1 the next rollout's request sent ahead (:class:`SendAhead`).

Before each item, the rollouts of the next items this process owns are started off the main thread, up to
K, and each item's ``runtest`` collects its own; reports, persistence, resume and crash safety are those of
K = 1. A rollout started ahead whose item never runs is dropped unreported (its key stays owed; ``dropped``
counts them). Output of an in-flight rollout is routed to its own item (:mod:`..._engine.rollout_output`)."""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from ..._engine.inflight import RolloutPool
from ..._engine.rollout_output import OutputRouting
from ..._engine.runner import declared_thread_safe
from ..._items.nodes import EvalContext, RolloutItem, time_call_as_rollout
from ..._policy.stop.afford import Ceilings
from ..._policy.stop.stop_condition import parse as parse_stop_condition
from ..._project.splits import TEST_SPLIT
from .lean_protocol import MarkedItems

WORKEROUTPUT_KEY = "capevolve_dropped_rollouts"
SKIPPING_MARKS = frozenset({"skip", "skipif", "xfail"})  # pytest's setup may not run such an item
# options under which no rollout is sent ahead (-x/--maxfail, --stepwise, --pdb)
STOPPING_OPTIONS = ("maxfail", "stepwise", "stepwise_skip", "stepwise_reset", "usepdb")


class Fanout:
    def __init__(self, config: pytest.Config, context: EvalContext, width: int) -> None:
        self.config = config
        self.context = context
        self.width = width
        self.dropped = 0
        self._index: dict[int, int] | None = None  # id(item) -> position in session.items
        self._abandoned: set[concurrent.futures.Future[Any]] = set()
        self._worker: Any = None  # xdist's worker plugin, found at the first item
        # pytest's own run loop, in order (see _in_order_at): the items started ahead, in order
        # (position, nodeid); the position the window has been started up to; the last position
        self._in_order = True
        self._ahead: collections.deque[tuple[int, str]] = collections.deque()
        self._next = 0
        self._last_at = -1
        self._skippable = MarkedItems(SKIPPING_MARKS)
        context.inflight = RolloutPool(context.runner)
        context.routing = OutputRouting(config)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Late enough that pytest's capture and logging plugins exist."""
        assert self.context.routing is not None
        self.context.routing.install()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
        """Under pytest's protocol (the lean one does this itself): an in-flight rollout's times."""
        time_call_as_rollout(item, call)
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        self._start_ahead(item, nextitem)
        return (yield)

    def _start_ahead(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        at = self._in_order_at(item, nextitem)
        if at is not None:
            self._start_ahead_in_order(item.session.items, at)
            return
        self._in_order = False  # someone else's run loop, or a worker's: the general way from now on
        window = [i for i in self.owned_from(item, nextitem)[: self.width] if self._startable(i)]
        started = self.context.started
        wanted = {i.nodeid for i in window}
        for nodeid in [n for n in started if n not in wanted]:
            # started ahead, but its item is no longer coming here: never reported, never persisted
            self.dropped += 1
            self._abandoned.add(started.pop(nodeid))
        for ahead in window:
            if ahead.nodeid not in started:
                self._wait_for_slot()
                ahead.start()  # type: ignore[attr-defined]  # the window holds rollout items only

    def _in_order_at(self, item: pytest.Item, nextitem: pytest.Item | None) -> int | None:
        """``item``'s position when pytest's own loop runs ``session.items`` in order (no xdist), so only
        the window's new end needs starting; None otherwise."""
        if not self._in_order or hasattr(self.config, "workerinput"):
            return None
        at = self._position(item, nextitem)
        if at is None or at < self._last_at:
            return None
        self._last_at = at
        return at

    def _position(self, item: pytest.Item, nextitem: pytest.Item | None) -> int | None:
        """``item``'s position in ``session.items`` if ``nextitem`` follows it there, else None."""
        items = item.session.items
        if self._index is None:
            self._index = {id(it): n for n, it in enumerate(items)}
        at = self._index.get(id(item))
        return None if at is None or next(iter(items[at + 1 : at + 2]), None) is not nextitem else at

    def _start_ahead_in_order(self, items: list[pytest.Item], at: int) -> None:
        """The window ``items[at : at + K]`` in O(1) per item: rollouts of items before ``at`` that never
        collected are dropped, new items started."""
        started = self.context.started
        while self._ahead and self._ahead[0][0] < at:
            _, nodeid = self._ahead.popleft()
            future = started.pop(nodeid, None)
            if future is not None:  # started ahead, but its item did not run it
                self.dropped += 1
                self._abandoned.add(future)
        end = min(at + self.width, len(items))
        for index in range(max(self._next, at), end):
            ahead = items[index]
            if ahead.nodeid not in started and self._startable(ahead):
                self._wait_for_slot()
                ahead.start()  # type: ignore[attr-defined]  # the window holds rollout items only
                if ahead.nodeid in started:
                    self._ahead.append((index, ahead.nodeid))
        self._next = max(self._next, end)

    def _startable(self, item: pytest.Item) -> bool:
        """A rollout item with no ``skip``, ``skipif`` or ``xfail`` mark: pytest's setup decides whether a
        marked one runs, and one started ahead then skipped would be paid for nothing."""
        return isinstance(item, RolloutItem) and not self._skippable(item)

    def _wait_for_slot(self) -> None:
        """Dropped rollouts still running count toward K until they end."""
        while True:
            self._abandoned = {f for f in self._abandoned if not f.done()}
            if not self._abandoned or len(self.context.started) + len(self._abandoned) < self.width:
                return
            concurrent.futures.wait(self._abandoned, return_when=concurrent.futures.FIRST_COMPLETED)

    def owned_from(self, item: pytest.Item, nextitem: pytest.Item | None) -> list[pytest.Item]:
        session = item.session
        if self._worker is None and hasattr(self.config, "workerinput"):
            plugins = self.config.pluginmanager.get_plugins()
            self._worker = next((p for p in plugins if type(p).__name__ == "WorkerInteractor"), None)
        worker = self._worker
        owned = [item] + ([nextitem] if nextitem is not None else [])
        if worker is None:
            at = self._position(item, nextitem)  # None: someone else's run loop
            return owned if at is None else list(session.items[at : at + self.width])
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
        self.dropped += len(self.context.started)
        self.context.started.clear()
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKEROUTPUT_KEY] = self.dropped

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.context.inflight is not None:
            self.context.inflight.close()
        if self.context.routing is not None:
            self.context.routing.uninstall()


class SendAhead:
    """Tells the running item which items come next: their requests go to the same sandbox child once the
    last answer is read, only if they are the same candidate's (its code can kill this process, and the
    unpersisted rollouts lost must be its own, never its rival arm's). Several at once while rollouts are
    quick (``_items.nodes.send_ahead``), the child running them in turn; records as at concurrency 1; an
    answer whose item never runs stays owed. Only where a few quick rollouts thrown away matter to nobody
    (:func:`wanted`). ``-p no:capevolve-ahead`` turns it off."""

    def __init__(self, context: EvalContext) -> None:
        self.context = context
        self._marked = MarkedItems()  # an item with a mark is never sent ahead, only run in its turn
        self._index: dict[int, int] | None = None  # id(item) -> position in session.items
        self._current: tuple[pytest.Item, pytest.Item | None] | None = None
        context.following = self.following

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        following = nextitem if type(nextitem) is RolloutItem and not self._marked(nextitem) else None
        self.context.next_item, self._current = following, (item, nextitem)
        try:
            return (yield)
        finally:
            self.context.next_item, self._current = None, None

    def following(self) -> Iterator[RolloutItem]:
        """The items run after the current one, in order, while each may be sent ahead: in pytest's own
        loop the items after it in ``session.items``; elsewhere (an xdist worker, whose next items the
        controller decides) the next one only."""
        if self._current is None or self.context.next_item is None:
            return
        item, nextitem = self._current
        items = item.session.items
        if self._index is None:
            self._index = {id(it): n for n, it in enumerate(items)}
        at = self._index.get(id(item), -2)
        worker = hasattr(item.config, "workerinput")
        in_order = not worker and 0 <= at < len(items) - 1 and items[at + 1] is nextitem
        for index in range(at + 1, len(items)) if in_order else ():
            following = items[index]
            if type(following) is not RolloutItem or self._marked(following):
                return
            yield following
        if not in_order:
            yield self.context.next_item


def wanted(config: pytest.Config, context: EvalContext, width: int) -> bool:
    """Send ahead only for an adapter declaring ``thread_safe = True``, sync, and no sequential gate, spend
    ceiling, test split, ``-x``/``--maxfail``/``--stepwise``/``--pdb``."""
    plan = context.plan
    # the spec's ceilings, and those its stop_condition states ("at most 20 rollouts")
    ceilings = Ceilings.from_spec(context.spec, parse_stop_condition(context.spec.stop_condition))
    return (
        width == 1
        and not context.runner.is_async
        # declared, not taken for granted: at concurrency 1 nothing used to overlap
        and declared_thread_safe(context.runner.adapter)
        and getattr(context.runner.adapter, "thread_safe", None) is True
        and plan.sequential is None
        and plan.budget is None
        and ceilings.max_usd is None
        and ceilings.max_metric_calls is None
        and plan.split != TEST_SPLIT
        # --sw-skip / --sw-reset imply --stepwise in pytest's own pytest_configure, after ours
        and not any(getattr(config.option, name, 0) for name in STOPPING_OPTIONS)
    )


def register(config: pytest.Config, context: EvalContext, width: int) -> None:
    if width > 1 or context.runner.is_async:
        config.pluginmanager.register(Fanout(config, context, width), "capevolve-fanout")
    if wanted(config, context, width):
        config.pluginmanager.register(SendAhead(context), "capevolve-ahead")
