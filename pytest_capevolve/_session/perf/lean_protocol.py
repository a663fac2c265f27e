"""A lean run protocol for rollout items: one phase run, three reports, the same hooks seen.

pytest runs every item through ``runtestprotocol``: three phases (setup, call, teardown), each
a hook with its own wrappers (capture, logging, unraisable and thread exceptions, skipping) and
each turned into a report by ``pytest_runtest_makereport``. A trivial item costs ~350 µs of CPU
that way, more than a no-op rollout and its record together. A :class:`~..items.RolloutItem`
has nothing to set up or tear down — it is not a ``Function``: no fixtures, no ``setup_module``,
its collectors (the spec file, the split) set up nothing — so for it this plugin:

- calls ``pytest_runtest_logstart``;
- reports the setup phase passed without running it: the report ``pytest_runtest_makereport``
  builds for a phase that raised nothing, logged through ``pytest_runtest_logreport``;
- runs the call phase exactly as pytest does — ``pytest_runtest_call`` with every wrapper
  around it (so the adapter's prints and log records are captured and shown for a failed
  rollout as before; an unraisable or thread exception still surfaces), made into a report
  (see below) and logged; ``pytest_exception_interact`` for ``--pdb``;
- reports the teardown phase passed without running it, like the setup;
- calls ``pytest_runtest_logfinish``.

So everything that watches reports — the terminal (the progress dots, ``-rA``, ``--durations``),
junitxml, ``-x``/``--maxfail`` (the session's own ``logreport``), ``--lf`` (cacheprovider),
xdist's worker (which forwards logstart, each report and logfinish to the controller), our
persistence and retention — sees the same three reports with the same outcomes, sections and
user properties as under pytest's protocol; Ctrl-C (``KeyboardInterrupt`` in the call phase)
and ``pytest.exit`` propagate from the same place.

What is skipped, and why it may be:

- the ``pytest_runtest_setup`` and ``pytest_runtest_teardown`` hooks. pytest's own
  implementations push the item on the ``SetupState`` stack (its collectors set up nothing, and
  nothing registers finalizers on a rollout item), evaluate ``skip``/``xfail`` marks (an item
  with any mark, its own or a collector's, takes pytest's protocol instead), set
  ``PYTEST_CURRENT_TEST`` (set by the call phase, and removed at the end as teardown does),
  collect unraisable and thread exceptions (the call phase's implementations still do, and
  pytest's unconfigure collects what is left), and wrap the phase in capture and logging that
  would capture nothing, since nothing runs.
- ``pytest_runtest_makereport`` for the setup and teardown phases, and for a call phase that
  raised nothing: their reports are built here the way pytest's default implementation builds
  a passed report (the item's id, location, keywords, captured sections so far and user
  properties; the call's times — a rollout run in flight's own, see
  :func:`..items.time_call_as_rollout` — a duration of 0 for setup and teardown: nothing ran); the
  wrappers pytest ships around it (skipping's xfail, tmpdir's outcome for ``tmp_path``
  retention, unittest's ``SkipTest``) change nothing for a passed phase of an unmarked item.
  A call phase that raised (a failed rollout, a skip) is made into a report by the hook.

Those two claims hold for the plugins in :data:`KNOWN_PLUGINS` (pytest's own, hypothesis's and
pytest-probability's).
When any other plugin implements one of these hooks — a project's ``conftest.py``, pytest-html,
pytest-rerunfailures — the session takes pytest's protocol, so that hook is called as before.
So do anything but a rollout item (microcase items run in ordinary pytest sessions), a rollout
item with a mark, and every item under ``--setup-only``, ``--setup-show`` or ``--setup-plan``.
``-p no:capevolve-protocol`` (on the command line, or in ``addopts``) restores pytest's protocol
for rollout items too; the two give the same terminal lines, junitxml and records
(tests/e2e/test_lean_protocol.py).

It is registered in every process that runs rollout items (the plain session and each xdist
worker) and composes with :mod:`.fanout`: that plugin's ``pytest_runtest_protocol`` wrapper
starts the next items' rollouts ahead, then this implementation runs the item, whose
``runtest`` collects its own.
"""

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
from .marks import MarkedItems

PLUGIN_NAME = "capevolve-protocol"
CURRENT_TEST = "PYTEST_CURRENT_TEST"


class LeanProtocol:
    """Registered in every process that runs rollout items (see the module docstring)."""

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
        """The call phase as ``call_and_report`` runs it. The logging plugin's call wrapper
        files the phase's records under the dict its setup wrapper makes: made here instead,
        and dropped after, as its teardown wrapper does. A call that raised nothing gets the
        report pytest's default ``pytest_runtest_makereport`` builds (what the known plugins'
        wrappers leave as it is for an unmarked item); one that raised, the hook's."""
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
    """Do only :data:`KNOWN_PLUGINS` implement the hooks the lean protocol skips (setup and
    teardown) or calls for the call phase alone (makereport)? Another plugin — a project's
    ``conftest.py``, pytest-html, pytest-rerunfailures — means pytest's protocol, so it is called
    exactly as before."""
    hooks = [getattr(ihook, name) for name in SKIPPED_HOOKS]
    return all(impl.plugin_name in KNOWN_PLUGINS for hook in hooks for impl in hook.get_hookimpls())


# pytest ≥ 9 builds a report from the item's structured id (``nodeid`` is its string form)
_ITEM_ID = "id" if isinstance(getattr(pytest.Item, "id", None), property) else "nodeid"


def _passed(
    item: pytest.Item, when: str, keywords: dict[str, Any], call: CallInfo[None] | None = None
) -> pytest.TestReport:
    """What ``TestReport.from_item_and_call`` makes of a phase that raised nothing: passed, the
    item's captured sections so far, its user properties; the call's times, or for a phase that
    ran nothing, no duration."""
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
    """Register the protocol unless ``-p no:capevolve-protocol`` blocked it."""
    config.pluginmanager.register(LeanProtocol(config), PLUGIN_NAME)
