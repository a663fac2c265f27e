"""What a rollout run off the main thread writes and logs, kept for that rollout alone.

A rollout in flight runs while the main thread reports other items, so a plain ``print`` would
land in whichever item's capture is active. Instead :data:`CURRENT` (a context variable set
around each rollout) names its :class:`RolloutOutput`, where routed streams and
:class:`RolloutLogFilter` keep its writes and records for its item (:mod:`.routed_output`).
Not routed: writes to a file descriptor, and threads the adapter starts itself."""

from __future__ import annotations

import functools
import logging
import time
from contextvars import ContextVar
from typing import Any


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
        if self.started is None or self.ended is None:
            return None
        return self.started, self.ended


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


def is_routed(stream: Any) -> bool:
    return isinstance(stream, (RoutedStream, _RoutedWrites))


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
