"""What a rollout in flight prints and logs reaches its own item, as at K = 1.

The adapters below write while other rollouts are in flight: each waits at a barrier of K
parties between its first and last line (K from CAPEVOLVE_TEST_WIDTH), so its lines are
written while the main thread reports or captures other items. Each rollout also takes 50 ms,
so its call report has a duration to show.
"""

from __future__ import annotations

import collections
import re

WRITTEN = re.compile(r"(hello from|bye from|stderr of|log of) (q\d\d)")


def written(text: str | None) -> collections.Counter[tuple[str, str]]:
    return collections.Counter(WRITTEN.findall(text or ""))


def test_a_routed_stream_keeps_each_rollouts_writes_and_passes_on_the_rest() -> None:
    """The pieces on their own: a write where no rollout is current reaches the wrapped stream;
    one made in a rollout's context (its thread, or a context copied from it) reaches only that
    rollout's buffer; a log record is kept once however many filtered handlers it reaches."""
    import contextvars
    import io
    import logging
    import threading

    from pytest_capevolve._engine.rollout_output import (
        CURRENT,
        RolloutLogFilter,
        RolloutOutput,
        RoutedStream,
    )

    wrapped = io.StringIO()
    stream = RoutedStream(wrapped, "stdout")
    outputs = {name: RolloutOutput() for name in ("a", "b")}
    log_filter = RolloutLogFilter()
    record = logging.LogRecord("agent", logging.INFO, __file__, 1, "log of %s", ("a",), None)

    def rollout(name: str) -> None:
        CURRENT.set(outputs[name])
        print("hello from", name, file=stream)
        if name == "a":  # the same record at two handlers' filters: kept once, handled by neither
            assert not log_filter.filter(record) and not log_filter.filter(record)
        contextvars.copy_context().run(lambda: stream.write(f"copied {name}\n"))

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(rollout, n)) for n in outputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("main", file=stream)
    assert log_filter.filter(record)  # no rollout current: handled as it comes
    assert wrapped.getvalue() == "main\n"
    assert stream.getvalue() == "main\n"  # the rest is the wrapped stream's
    for name, output in outputs.items():
        assert "".join(output.stdout) == f"hello from {name}\ncopied {name}\n"
    assert outputs["a"].records == [record] and outputs["b"].records == []


def test_a_stream_routed_in_place_stays_what_it_was() -> None:
    """pytest's capture file is routed as the same object, still a CaptureIO (pytest asserts it);
    the interpreter's own stream class cannot be, and is wrapped instead; unroute undoes it."""
    import io

    from _pytest.capture import CaptureIO

    from pytest_capevolve._engine.rollout_output import (
        CURRENT,
        RolloutOutput,
        route_in_place,
        unroute,
    )

    capture = CaptureIO()
    assert route_in_place(capture, "stderr")
    assert isinstance(capture, CaptureIO) and not route_in_place(capture, "stderr")  # once
    output = RolloutOutput()
    token = CURRENT.set(output)
    try:
        print("in flight", file=capture)
    finally:
        CURRENT.reset(token)
    print("main", file=capture)
    assert capture.getvalue() == "main\n" and "".join(output.stderr) == "in flight\n"
    unroute(capture)
    assert type(capture) is CaptureIO
    assert not route_in_place(io.TextIOWrapper(io.BytesIO()), "stdout")  # a built-in class
