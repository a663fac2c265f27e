"""What a rollout run off the main thread writes and logs, kept for that rollout alone.

A rollout in flight runs while the main thread reports other items, so a plain ``print`` would
land in whichever item's capture is active. Instead :data:`CURRENT` (a context variable set
around each rollout) names its :class:`RolloutOutput`, where routed streams and
:class:`RolloutLogFilter` keep its writes and records for its item. Not routed: writes to a file
descriptor, and threads the adapter starts itself.

:class:`OutputRouting` puts the routing on what pytest swaps in at every phase, in each process
whose rollouts run in flight (K > 1 or an async adapter): pytest's capture file is routed in
place, the interpreter's stream wrapped in a :class:`RoutedStream`, and logging handlers get a
:class:`RolloutLogFilter`; :meth:`OutputRouting.replay`, in the item's call phase, gives the
report the sections it has at K = 1."""

from __future__ import annotations

import functools
import logging
import sys
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the sandbox child imports this module, and never routes pytest's capture
    import pytest


class RolloutOutput:
    """One rollout's writes and log records, and when it ran (wall clock, as pytest reports)."""

    __slots__ = ("stdout", "stderr", "records", "started", "ended")

    def __init__(self) -> None:
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.records: list[logging.LogRecord] = []
        self.started: float | None = None
        self.ended: float | None = None

    def begin(self) -> None:
        self.started = time.time()

    def end(self) -> None:
        """The first end counts: the rollout's own, or its deadline's."""
        if self.ended is None:
            self.ended = time.time()

    def span(self) -> tuple[float, float] | None:
        """(start, stop) of the rollout itself, once it has begun and ended."""
        return None if self.started is None or self.ended is None else (self.started, self.ended)


CURRENT: ContextVar[RolloutOutput | None] = ContextVar("capevolve_rollout_output", default=None)


def _kept(name: str, text: str) -> bool:
    """Whether ``text`` was kept in the current rollout's buffer ``name`` (there is a rollout)."""
    output = CURRENT.get()
    if output is not None:
        getattr(output, name).append(text)
    return output is not None


class RoutedStream:
    """A text stream whose writes go to the current rollout's buffer when there is one; all but
    ``write``/``writelines``/``flush`` is the wrapped stream's."""

    def __init__(self, wrapped: Any, name: str) -> None:
        self.wrapped = wrapped
        self.name = name  # "stdout" or "stderr": which buffer of a RolloutOutput

    def write(self, text: str) -> int:
        return len(text) if _kept(self.name, text) else self.wrapped.write(text)  # type: ignore[no-any-return]

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if CURRENT.get() is None:
            self.wrapped.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    def __repr__(self) -> str:
        return f"<RoutedStream {self.name} {self.wrapped!r}>"


class _RoutedWrites:
    """Mixed into the class of a stream routed in place (see :func:`route_in_place`)."""

    _capevolve_stream: str

    def write(self, text: str) -> int:
        return len(text) if _kept(self._capevolve_stream, text) else super().write(text)  # type: ignore[misc]

    def flush(self) -> None:
        if CURRENT.get() is None:
            super().flush()  # type: ignore[misc]


@functools.cache
def _routed_class(cls: type) -> type:
    return type(f"Routed{cls.__name__}", (_RoutedWrites, cls), {"__module__": __name__})


def route_in_place(stream: Any, name: str) -> bool:
    """Route ``stream``'s writes by giving it a subclass of its own class: the same object, still
    an instance of what it was (pytest asserts its capture file is a ``CaptureIO``). False for a
    built-in class (wrap that in a :class:`RoutedStream`); :func:`unroute` undoes it."""
    cls = type(stream)
    if issubclass(cls, _RoutedWrites):
        return False
    try:
        stream._capevolve_stream = name
        # (mypy reads a class's __hash__ as unbound and so a class as not Hashable: it is)
        stream.__class__ = _routed_class(cls)  # type: ignore[arg-type]
    except (AttributeError, TypeError):
        if "_capevolve_stream" in getattr(stream, "__dict__", {}):
            del stream._capevolve_stream
        return False
    return True


def unroute(stream: Any) -> None:
    cls = type(stream)
    if issubclass(cls, _RoutedWrites):
        stream.__class__ = next(base for base in cls.__mro__[1:] if not issubclass(base, _RoutedWrites))
        del stream._capevolve_stream


class RolloutLogFilter(logging.Filter):
    """Keeps a rollout's records for its item: the handler it is on handles them then."""

    def filter(self, record: logging.LogRecord) -> bool:
        output = CURRENT.get()
        if output is None:
            return True
        records = output.records
        if not records or records[-1] is not record:  # one record reaches each filtered handler
            records.append(record)
        return False


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
        if held is None or isinstance(held, (RoutedStream, _RoutedWrites)):
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
