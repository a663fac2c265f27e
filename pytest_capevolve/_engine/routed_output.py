"""Routing in-flight rollouts' output through pytest's capture, in each process that runs them.

Needed at K > 1 or with an async adapter only. pytest swaps ``sys.stdout``/``sys.stderr`` at
every phase, so the routing goes on what pytest swaps in: its capture file is routed in place,
the interpreter's stream wrapped in a :class:`.rollout_output.RoutedStream`, and logging handlers
get a :class:`.rollout_output.RolloutLogFilter`. :meth:`OutputRouting.replay`, in the item's
call phase, gives the report the sections it has at K = 1."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

from .rollout_output import RolloutLogFilter, RolloutOutput, RoutedStream, is_routed, route_in_place, unroute

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
        """In the item's call phase: the rollout's writes and logs, replayed under its capture."""
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
    """pytest's global ``SysCapture`` objects for stdout and stderr (none under ``-s``)."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    multi = getattr(capman, "_global_capturing", None)
    captures = []
    for part in (getattr(multi, "out", None), getattr(multi, "err", None)):
        capture = getattr(part, "syscapture", part)  # --capture=fd: its sys-level half
        if getattr(capture, "name", None) in STREAMS and hasattr(capture, "tmpfile"):
            captures.append(capture)
    return captures
