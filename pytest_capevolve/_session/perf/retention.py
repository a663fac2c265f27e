"""What a session keeps in memory: a finished rollout's item shed, its passed reports slimmed, the heap
frozen.

pytest keeps every item, and the terminal every report (~0.6 KB each, three per rollout: 60,000 rollouts add
up). Once every plugin has seen a passed report, the terminal's copy becomes a :class:`PassedReport` holding
what is read afterwards (the count line, ``--durations``, ``-rA``/``-rP``). In every process."""

from __future__ import annotations

import atexit
import functools
import gc
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import pytest
from _pytest.reports import TestReport
from _pytest.skipping import xfailed_key
from _pytest.tmpdir import tmppath_result_key

from ..._items.nodes import RolloutItem
from ..._store.rollouts.record import RECORD_PROPERTY

NO_KEYWORDS: MappingProxyType[str, Any] = MappingProxyType({})
# pytest ≥ 9 identifies a report by a NodeId (``nodeid`` is a property over it); before, by a string
IDENTITY = "_id" if isinstance(getattr(TestReport, "nodeid", None), property) else "nodeid"
# pytest's own per-item stash entries whose readers are done once the item's protocol is over:
# skipping's xfail evaluation (read by makereport) and tmpdir's outcomes (read by tmp_path's teardown)
FINISHED_STASH_KEYS = (xfailed_key, tmppath_result_key)


class PassedReport(TestReport):
    """A passed report as kept once every plugin has seen it: no keywords, record, start/stop or xdist
    routing; captured output, user properties and ``node`` are kept by :class:`PassedReportWith`."""

    __slots__ = (IDENTITY, "location", "when", "duration")

    outcome = "passed"
    keywords = NO_KEYWORDS
    longrepr = None
    sections: Any = ()
    user_properties: Any = ()

    def __init__(self, report: TestReport, same_item: PassedReport | None = None) -> None:
        # no TestReport.__init__: it would fill the __dict__ these slots replace
        if same_item is not None and same_item.location == report.location:
            # xdist decodes each of an item's three reports on its own: keep one id and location
            setattr(self, IDENTITY, getattr(same_item, IDENTITY))
            self.location = same_item.location
        else:
            setattr(self, IDENTITY, getattr(report, IDENTITY))
            self.location = report.location
        self.when = report.when
        self.duration = report.duration

    @staticmethod
    def of(report: TestReport, same_item: PassedReport | None = None) -> PassedReport:
        kept = [p for p in report.user_properties if p[0] != RECORD_PROPERTY]
        if not (kept or report.sections or "node" in report.__dict__):
            return PassedReport(report, same_item)
        slim = PassedReportWith(report, same_item)
        slim.sections = list(report.sections) if report.sections else ()
        slim.user_properties = kept if kept else ()
        if "node" in report.__dict__:
            slim.node = report.__dict__["node"]  # type: ignore[attr-defined]  # xdist's, kept as it came
        return slim


class PassedReportWith(PassedReport):
    __slots__ = ("sections", "user_properties", "node")  # type: ignore[misc]


def slimmable(report: Any) -> bool:
    """A plain passed test report (no xfail, no failure text): the kind a summary only counts."""
    return (
        type(report) is TestReport
        and report.passed
        and not hasattr(report, "wasxfail")
        and report.longrepr is None
    )


class Retention:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._earlier: dict[str, PassedReport] = {}  # nodeid -> its item's last slimmed report

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        try:
            return (yield)
        finally:
            if isinstance(item, RolloutItem):
                stash = item.stash
                for key in FINISHED_STASH_KEYS:
                    if key in stash:
                        del stash[key]
                item.shed()
                self._earlier.pop(item.nodeid, None)  # a lean call's report, no teardown after it

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after every plugin saw the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Iterator[None]:
        result = yield
        if slimmable(report):
            self._replace(report)
        if report.when == "teardown":
            self._earlier.pop(report.nodeid, None)
        return result

    def _replace(self, report: TestReport) -> None:
        """The entry the terminal appended for ``report`` in its stats becomes a :class:`PassedReport`."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(terminal, "stats", {})
        likely = stats.get("passed" if report.when == "call" else "")  # where a passed one goes
        for reports in (likely, *stats.values()) if likely else stats.values():
            if reports and reports[-1] is report:
                slim = reports[-1] = PassedReport.of(report, self._earlier.get(report.nodeid))
                if report.when != "teardown":
                    self._earlier[report.nodeid] = slim
                return


class FrozenStartupHeap:
    """What is alive when the run loop starts (modules, spec, plan, items) lives to the end, yet every full
    collection walks it (~0.25 s of a 2000-rollout session): frozen for the loop, unless someone else froze
    the heap; first as configure ends, so the plan it made unwalked (collection paused) is never walked."""

    frozen = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self) -> None:
        if self.frozen or gc.get_freeze_count() == 0:
            gc.freeze()
            self.frozen = True

    def unfreeze(self) -> None:
        if self.frozen:
            gc.unfreeze()
            self.frozen = False


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(Retention(config), "capevolve-retention")
    heap = FrozenStartupHeap()
    config.pluginmanager.register(heap, "capevolve-heap")
    # Given back as the config is cleaned up, not at unconfigure: pytest collects garbage twice
    # when it unconfigures (its unraisable-exception plugin: in its unconfigure, then in a
    # cleanup it added after this one, which runs first), and with the heap still frozen those
    # collections skip the start-up heap (~0.1 s at 60,000 rollouts planned).
    config.add_cleanup(heap.unfreeze)
    heap.pytest_runtestloop()  # the plan configure made; again as the loop starts: the items
    _freeze_at_exit()


@functools.cache  # once per process
def _freeze_at_exit() -> None:
    """At exit, freeze what is left: the last collections would walk a heap the OS is about to take back
    (0.2–0.3 s after a 60k-rollout resume)."""
    atexit.register(gc.freeze)
