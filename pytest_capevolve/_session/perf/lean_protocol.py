"""A lean run protocol for rollout items: one phase run, three reports, the same hooks seen.

pytest's ``runtestprotocol`` runs three phases, each a hook with its wrappers and a report: ~350 µs of CPU
per item, more than a no-op rollout. A :class:`~..items.RolloutItem` has nothing to set up or tear down (no
fixtures; its collectors set up nothing), so this plugin calls ``pytest_runtest_logstart``, reports setup
passed without running it, runs the call phase exactly as pytest does (``pytest_runtest_call`` with every
wrapper, so captured output and unraisable exceptions still show; ``pytest_exception_interact`` for
``--pdb``), reports teardown passed, and calls ``pytest_runtest_logfinish``. Everything that watches
reports (terminal, junitxml, ``-x``, ``--lf``, xdist, persistence) sees the same three reports.

What is skipped: the setup and teardown hooks (pytest's own push a stack nothing uses, evaluate marks — a
marked item takes pytest's protocol — set ``PYTEST_CURRENT_TEST``, which the call phase sets too, and
capture nothing), and ``pytest_runtest_makereport`` for phases that raised nothing (the passed report is
built here as pytest's default builds it; the wrappers of :data:`KNOWN_PLUGINS` change nothing for it).

When another plugin implements one of these hooks (a ``conftest.py``, pytest-html, pytest-rerunfailures),
the session takes pytest's protocol; so do non-rollout items, marked items and ``--setup-only``/``-show``/
``-plan``. ``-p no:capevolve-protocol`` restores pytest's protocol; both give the same output
(tests/e2e/test_lean_protocol.py). Registered in every process that runs rollout items; :mod:`.fanout`'s
wrapper starts the next rollouts ahead around it."""

from __future__ import annotations

import os
import time
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

PLUGIN_NAME = "capevolve-protocol"
CURRENT_TEST = "PYTEST_CURRENT_TEST"


class MarkedItems:
    """Whether a rollout item carries a mark, its own or a collector's above: pytest's setup may skip
    it (``skip``, ``skipif``, ``xfail(run=False)``), so the lean protocol and sending a rollout ahead
    leave it to pytest's full protocol. One answer per collector, kept: thousands of items, few collectors."""

    def __init__(self) -> None:
        self._parents: dict[int, bool] = {}  # id(parent) -> a collector above carries a mark

    def __call__(self, item: pytest.Item) -> bool:
        if item.own_markers:
            return True
        parent = item.parent
        marked = self._parents.get(id(parent))
        if marked is None:
            marked = self._parents[id(parent)] = any(True for _ in parent.iter_markers())  # type: ignore[union-attr]
        return marked


class LeanProtocol:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.reraise = get_reraise_exceptions(config)
        option = config.option
        self.full = bool(
            getattr(option, "setuponly", False)
            or getattr(option, "setupshow", False)
            or getattr(option, "setupplan", False)
        )
        self._marked = MarkedItems()
        self._lean_hooks: dict[int, bool] = {}  # id(hook proxy) -> only_known_implementations

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        if type(item) is not RolloutItem or self.full or self._marked(item):
            return None  # pytest's protocol
        ihook = item.ihook
        lean = self._lean_hooks.get(id(ihook))
        if lean is None:
            lean = self._lean_hooks[id(ihook)] = only_known_implementations(ihook)
        if not lean:
            return None
        nodeid, location = item.nodeid, item.location
        keywords = dict.fromkeys(item.keywords, 1)  # as each report would compute it: once here
        ihook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        ihook.pytest_runtest_logreport(report=_passed(item, "setup", keywords.copy()))
        self._call(item, ihook, keywords.copy())
        ihook.pytest_runtest_logreport(report=_passed(item, "teardown", keywords))
        os.environ.pop(CURRENT_TEST, None)  # as pytest's teardown does
        ihook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
        return True

    def _call(self, item: pytest.Item, ihook: Any, keywords: dict[str, Any]) -> None:
        """The call phase as ``call_and_report`` runs it, with the logging plugin's records dict made here
        and dropped after. A call that raised nothing gets pytest's default passed report; one that raised,
        the hook's."""
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
# without marks (pytest's own: the setup state, skip/xfail marks, capture, logging, unraisable and
# thread exceptions, unittest's skip conversion, tmp_path's retention; hypothesis's plugin,
# which adds to the reports of hypothesis tests only; pytest-probability's, whose makereport
# wrapper returns at once for anything but its own BenchItem (read in 0.3.0); and our fanout's
# makereport wrapper, which gives an in-flight rollout's call its own times, as the lean call
# phase does itself)
KNOWN_PLUGINS = frozenset(
    {
        "runner",
        "skipping",
        "capturemanager",
        "logging-plugin",
        "threadexception",
        "unraisableexception",
        "unittest",
        "tmpdir",
        "hypothesispytest",
        "probability",
        "capevolve-fanout",
    }
)
SKIPPED_HOOKS = ("pytest_runtest_setup", "pytest_runtest_teardown", "pytest_runtest_makereport")


def only_known_implementations(ihook: Any) -> bool:
    """Do only :data:`KNOWN_PLUGINS` implement the hooks the lean protocol skips or calls for the call
    phase alone? Any other means pytest's protocol."""
    hooks = [getattr(ihook, name) for name in SKIPPED_HOOKS]
    return all(impl.plugin_name in KNOWN_PLUGINS for hook in hooks for impl in hook.get_hookimpls())


# pytest ≥ 9 builds a report from the item's structured id (``nodeid`` is its string form)
_ITEM_ID = "id" if isinstance(getattr(pytest.Item, "id", None), property) else "nodeid"


def _passed(
    item: pytest.Item, when: str, keywords: dict[str, Any], call: CallInfo[None] | None = None
) -> pytest.TestReport:
    """What ``TestReport.from_item_and_call`` makes of a phase that raised nothing (no duration for a phase
    that ran nothing)."""
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
    config.pluginmanager.register(LeanProtocol(config), PLUGIN_NAME)
