"""Routing in-flight rollouts' output through pytest's capture, in each process that runs them.

Installed by :mod:`.fanout` (K > 1, or an async adapter) in the plain session or each xdist
worker; K = 1 with a sync adapter runs rollouts on the main thread, under pytest's per-item
capture, and needs none of this.

pytest's capture swaps ``sys.stdout``/``sys.stderr`` at every phase: ``SysCapture.resume``
sets its capture file, ``suspend`` and ``done`` set back the stream it found (``_old``; with
``--capture=fd`` the same through ``FDCapture.syscapture``). A stream set once at ``sys.stdout``
would be swapped out at the next phase, so the routing is put on what pytest swaps in: the
global capture's file is routed in place (the same object, given a subclass of its class:
pytest asserts what class it is), and so is the stream it sets back when it can be; the
interpreter's own stream (of a built-in class) is wrapped in a
:class:`..project.rollout_output.RoutedStream` where pytest keeps it, as is the stream in place
now (``-s``: pytest swaps nothing). A rollout's write then goes to its own buffer whichever is
in place; every other write goes on to the stream pytest meant.

The logging plugin's handlers (per-item capture and ``caplog``, live logging, ``--log-file``)
get a :class:`..project.rollout_output.RolloutLogFilter`: a rollout's record is kept for its
item. While rollouts run, the root logger's level is held at the per-item capture's
``log_level`` (pytest lowers it only during a phase), so a record is kept whenever it would be
at K = 1, not only when the main thread happens to be in a phase.

:meth:`OutputRouting.replay`, in the item's call phase on the main thread, writes the buffers
and handles the records there, so the item's report gets the same sections as at K = 1.
Everything is put back in ``pytest_unconfigure``. What cannot be routed (writes to a file
descriptor, by C code or subprocesses; threads the adapter starts itself) is listed in
:mod:`..project.rollout_output`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

from .rollout_output import (
    RolloutLogFilter,
    RolloutOutput,
    RoutedStream,
    is_routed,
    route_in_place,
    unroute,
)

STREAMS = ("stdout", "stderr")
LOG_HANDLERS = ("caplog_handler", "report_handler", "log_cli_handler", "log_file_handler")


class OutputRouting:
    """Registered in each process whose rollouts run in flight (see the module docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.log_filter = RolloutLogFilter()
        self._in_place: list[Any] = []  # streams routed in place
        self._wrapped: list[tuple[Any, str, Any]] = []  # (owner, attribute, what it held)
        self._handlers: list[logging.Handler] = []
        self._root_level: int | None = None

    def install(self) -> None:
        for capture in _sys_captures(self.config):
            self._route(capture, "tmpfile", capture.name)
            self._route(capture, "_old", capture.name)
        for name in STREAMS:
            self._route(sys, name, name)
        logging_plugin = self.config.pluginmanager.get_plugin("logging-plugin")
        for attribute in LOG_HANDLERS:
            handler = getattr(logging_plugin, attribute, None)
            if isinstance(handler, logging.Handler):
                handler.addFilter(self.log_filter)
                self._handlers.append(handler)
        level = getattr(logging_plugin, "log_level", None)
        root = logging.getLogger()
        if level is not None and level < root.level:
            self._root_level = root.level
            root.setLevel(level)

    def _route(self, owner: Any, attribute: str, name: str) -> None:
        """Route the stream ``owner`` holds at ``attribute``: in place if it can be, else by
        putting a wrapper there (and at ``sys.stdout``/``sys.stderr`` if it is in place now)."""
        held = getattr(owner, attribute, None)
        if held is None or is_routed(held):
            return
        if route_in_place(held, name):
            self._in_place.append(held)
            return
        routed = RoutedStream(held, name)
        for stream in STREAMS:
            if getattr(sys, stream) is held and owner is not sys:
                setattr(sys, stream, routed)
        setattr(owner, attribute, routed)
        self._wrapped.append((owner, attribute, held))

    def uninstall(self) -> None:
        for stream in self._in_place:
            unroute(stream)
        self._in_place.clear()
        for owner, attribute, held in reversed(self._wrapped):
            routed = getattr(owner, attribute, None)
            if isinstance(routed, RoutedStream) and routed.wrapped is held:
                setattr(owner, attribute, held)
            for stream in STREAMS:
                current = getattr(sys, stream)
                if isinstance(current, RoutedStream) and current.wrapped is held:
                    setattr(sys, stream, held)
        self._wrapped.clear()
        for handler in self._handlers:
            handler.removeFilter(self.log_filter)
        self._handlers.clear()
        if self._root_level is not None:
            logging.getLogger().setLevel(self._root_level)
            self._root_level = None

    def replay(self, output: RolloutOutput) -> None:
        """On the main thread, in the item's call phase: what the rollout wrote and logged,
        written and handled again under the item's capture."""
        for name in STREAMS:
            text = "".join(getattr(output, name))
            if text:
                stream = getattr(sys, name)
                stream.write(text)
                stream.flush()
        if not output.records:
            return
        attached = logging.getLogger().handlers
        for record in output.records:
            for handler in self._handlers:
                if handler in attached and record.levelno >= handler.level:
                    handler.handle(record)


def _sys_captures(config: pytest.Config) -> list[Any]:
    """The ``SysCapture`` objects of pytest's global capture that swap ``sys.stdout`` and
    ``sys.stderr`` (none under ``-s`` or ``-p no:capture``)."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    multi = getattr(capman, "_global_capturing", None)
    captures = []
    for part in (getattr(multi, "out", None), getattr(multi, "err", None)):
        capture = getattr(part, "syscapture", part)  # --capture=fd: its sys-level half
        if getattr(capture, "name", None) in STREAMS and hasattr(capture, "tmpfile"):
            captures.append(capture)
    return captures
