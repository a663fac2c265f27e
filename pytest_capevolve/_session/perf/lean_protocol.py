"""A lean run protocol for rollout items: one phase run, its reports, the same outputs.

pytest's ``runtestprotocol`` costs ~350 µs of CPU per item, more than a no-op rollout. A rollout item has
nothing to set up or tear down, so setup and teardown are reported passed without running their hooks, and
the call phase runs exactly as pytest runs it (every wrapper, ``--pdb``): whatever watches reports (terminal,
junitxml, ``-x``, ``--lf``, xdist, persistence) sees the same three. Where only plugins that read nothing
of a passed setup or teardown watch (:data:`CALL_WATCHERS`: no junitxml, no xdist worker, no
``--durations``), those two reports are not made (~12 % of a no-op rollout's CPU): the call's is the one
they read. Another plugin implementing a skipped hook, a non-rollout or marked item,
``--setup-only``/``-show``/``-plan`` or ``-p no:capevolve-protocol`` take pytest's protocol, with the
same output (tests/e2e/test_lean_protocol.py). In every process that runs rollout items."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

import pytest
from _pytest.logging import caplog_handler_key, caplog_records_key
from _pytest.runner import CallInfo, check_interactive_exception
from _pytest.skipping import xfailed_key
from _pytest.stash import StashKey

try:
    from _pytest.runner import get_reraise_exceptions
except ImportError:  # an older pytest: what its call_and_report re-raises, written out

    def get_reraise_exceptions(config: pytest.Config) -> tuple[type[BaseException], ...]:
        reraise: tuple[type[BaseException], ...] = (pytest.exit.Exception,)
        if not config.getoption("usepdb", False):
            reraise += (KeyboardInterrupt,)
        return reraise


from ..._items.nodes import RolloutItem, time_call_as_rollout

CURRENT_TEST = "PYTEST_CURRENT_TEST"


class MarkedItems:
    """Whether a rollout item carries a mark (of ``names``, else any), its own or a collector's (one answer
    per collector): pytest's setup may skip it, so it is left to pytest's own protocol, never sent ahead."""

    def __init__(self, names: frozenset[str] | None = None) -> None:
        self._names = names  # the marks that count (None: any)
        self._parents: dict[int, bool] = {}  # id(parent) -> a collector above carries a mark

    def _any(self, marks: Iterable[pytest.Mark]) -> bool:
        return any(self._names is None or mark.name in self._names for mark in marks)

    def __call__(self, item: pytest.Item) -> bool:
        if self._any(item.own_markers):
            return True
        parent = item.parent
        marked = self._parents.get(id(parent))
        if marked is None:
            marked = self._parents[id(parent)] = self._any(parent.iter_markers())  # type: ignore[union-attr]
        return marked


class LeanProtocol:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.reraise = get_reraise_exceptions(config)
        option = config.option
        self.full = any(getattr(option, name, False) for name in ("setuponly", "setupshow", "setupplan"))
        self._marked = MarkedItems()
        # id(hook proxy) -> (only_known_implementations, whether a passed setup/teardown is watched)
        self._lean_hooks: dict[int, tuple[bool, bool]] = {}
        # what reads passed setup and teardown reports whoever else watches: an xdist worker forwards
        # them (its controller's plugins see them), --durations lists them, the "times" progress sums them
        self.phases_read = (
            hasattr(config, "workerinput")
            or config.getoption("durations", None) is not None
            or str(config.getini("console_output_style")).startswith("times")
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        if type(item) is not RolloutItem or self.full or self._marked(item):
            return None  # pytest's protocol
        ihook = item.ihook
        lean = self._lean_hooks.get(id(ihook))
        if lean is None:
            watched = self.phases_read or not only_call_watchers(ihook)
            lean = self._lean_hooks[id(ihook)] = (only_known_implementations(ihook), watched)
        if not lean[0]:
            return None
        phases = lean[1]
        nodeid, location = item.nodeid, item.location
        keywords = dict.fromkeys(item.keywords, 1)  # as each report would compute it: once here
        ihook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        if phases:
            ihook.pytest_runtest_logreport(report=_passed(item, "setup", keywords.copy()))
        self._call(item, ihook, keywords.copy() if phases else keywords)
        if phases:
            ihook.pytest_runtest_logreport(report=_passed(item, "teardown", keywords))
        os.environ.pop(CURRENT_TEST, None)  # as pytest's teardown does
        ihook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
        return True

    def _call(self, item: pytest.Item, ihook: Any, keywords: dict[str, Any]) -> None:
        """The call phase as ``call_and_report`` runs it (the logging plugin's records dict made here, dropped
        after); only a call that raised gets its report from the hook."""
        stash = item.stash
        stash[caplog_records_key] = {}
        try:
            call = CallInfo.from_call(lambda: ihook.pytest_runtest_call(item=item), "call", self.reraise)
            time_call_as_rollout(item, call)  # a rollout run in flight: its own times
        finally:
            keys: tuple[StashKey[Any], ...] = (caplog_records_key, caplog_handler_key)
            for key in keys:
                if key in stash:
                    del stash[key]
        if call.excinfo is None and not stash.get(xfailed_key, None):  # (an xfail mark added as it ran)
            report = _passed(item, "call", keywords, call)
        else:
            report = ihook.pytest_runtest_makereport(item=item, call=call)
        ihook.pytest_runtest_logreport(report=report)
        if check_interactive_exception(call, report):
            ihook.pytest_exception_interact(node=item, call=call, report=report)


# The plugins whose setup, teardown and makereport implementations do nothing for a rollout item
# without marks: pytest's own (setup state, skip/xfail, capture, logging, unraisable and thread
# exceptions, unittest's skips, tmp_path's retention), then hypothesis's (its tests' reports only),
# pytest-probability's (its BenchItem only, read in 0.3.0) and our fanout's (an in-flight rollout's
# times, as the lean call phase gives them)
KNOWN_PLUGINS = frozenset(
    {"runner", "skipping", "capturemanager", "logging-plugin", "threadexception", "unraisableexception"}
    | {"unittest", "tmpdir"}
    | {"hypothesispytest", "probability", "capevolve-fanout"}
)
SKIPPED_HOOKS = ("pytest_runtest_setup", "pytest_runtest_teardown", "pytest_runtest_makereport")


def only_known_implementations(ihook: Any) -> bool:
    """Do only :data:`KNOWN_PLUGINS` implement the hooks the lean protocol skips (else pytest's protocol)?"""
    hooks = [getattr(ihook, name) for name in SKIPPED_HOOKS]
    return all(impl.plugin_name in KNOWN_PLUGINS for hook in hooks for impl in hook.get_hookimpls())


# The plugins whose ``pytest_runtest_logreport`` does nothing with a passed setup or teardown report of
# a rollout item: pytest's terminal (it files one under its stats' "" key, which only --durations, the
# "times" progress and -rP's teardown sections read: a lean teardown has none), logging, session, --lf,
# --sw and progress plugins, and ours (they read call reports). With only these, such a report is not made.
CALL_WATCHERS = frozenset(
    {"terminalreporter", "logging-plugin", "session", "lfplugin", "stepwiseplugin", "terminalprogress-plugin"}
    | {"capevolve-persistence", "capevolve-retention", "capevolve-reporter", "capevolve-sequential"}
)


def only_call_watchers(ihook: Any) -> bool:
    """Do only :data:`CALL_WATCHERS` watch reports (else a rollout's setup and teardown are reported too)?"""
    return all(impl.plugin_name in CALL_WATCHERS for impl in ihook.pytest_runtest_logreport.get_hookimpls())


# pytest ≥ 9 builds a report from the item's structured id (``nodeid`` is its string form)
_ITEM_ID = "id" if isinstance(getattr(pytest.Item, "id", None), property) else "nodeid"


def _passed(
    item: pytest.Item, when: str, keywords: dict[str, Any], call: CallInfo[None] | None = None
) -> pytest.TestReport:
    """What ``TestReport.from_item_and_call`` makes of a phase that raised nothing."""
    if call is None:
        start = stop = time.time()
        duration = 0.0
    else:
        start, stop, duration = call.start, call.stop, call.duration
    return pytest.TestReport(
        getattr(item, _ITEM_ID),
        item.location,
        keywords,
        "passed",
        None,
        when,  # type: ignore[arg-type]
        [(f"Captured {key} {rwhen}", content) for rwhen, key, content in item._report_sections],
        duration,
        start,
        stop,
        user_properties=item.user_properties,
    )


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(LeanProtocol(config), "capevolve-protocol")
