"""The agent's end of the broker: what a command inside an agent says when it cannot reach it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pytest_capevolve import exitcodes
from pytest_capevolve._cli.agent import forwarded
from pytest_capevolve._confine.broker_wire import BROKER_ENV, control_pair


def _closed_fd() -> int:
    read, write = os.pipe()
    os.close(read)
    os.close(write)
    return read


def test_a_descriptor_a_parent_closed_names_pass_fds_not_a_new_agent(monkeypatch, capsys) -> None:
    # an agent's Python driver that runs `capevolve` with subprocess.run (close_fds=True by
    # default) leaves the socket's number in the environment and the socket behind
    monkeypatch.setenv(BROKER_ENV, str(_closed_fd()))
    assert forwarded(["spend"]) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert "pass_fds=(" in err and "close_fds=False" in err, err
    assert "start the agent again" not in err, err


def test_a_descriptor_that_is_not_a_socket_is_named_the_same_way(monkeypatch, capsys, tmp_path) -> None:
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_RDWR)  # the number reused for a file
    try:
        monkeypatch.setenv(BROKER_ENV, str(fd))
        assert forwarded(["spend"]) == exitcodes.USAGE
    finally:
        os.close(fd)
    assert "pass_fds=(" in capsys.readouterr().err


def test_subprocess_closes_the_socket_unless_passed_on() -> None:
    # the fact the message states: a child of subprocess.run sees the number, not the socket
    mine, theirs = control_pair()
    fd = theirs.fileno()
    probe = f"import os\ntry:\n    os.fstat({fd}); print('open')\nexcept OSError:\n    print('closed')"
    try:
        closed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        passed = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True, pass_fds=(fd,)
        )
    finally:
        mine.close()
        theirs.close()
    assert (closed.stdout.strip(), passed.stdout.strip()) == ("closed", "open")


@pytest.mark.parametrize("value", ["", "x"])
def test_outside_an_agent_nothing_is_forwarded(monkeypatch, value) -> None:
    monkeypatch.setenv(BROKER_ENV, value)
    assert forwarded(["spend"]) is None


class _ClosedPipe:
    """A stdout whose reader went away (`capevolve … | head` inside an agent), on a real descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = self

    def write(self, data: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self.fd


def test_a_reader_that_stops_early_inside_an_agent_is_no_traceback(monkeypatch, capsys, tmp_path) -> None:
    """`capevolve commit … | head -c 200` inside `capevolve agent` printed a BrokenPipeError
    traceback from the relay of the broker's output, where the same command outside an agent is
    a silent 141. Now: stdout stops, stderr still arrives, and the code is the same 141."""
    import socket

    from pytest_capevolve._cli.main import main
    from pytest_capevolve._confine import broker_wire

    here, there = socket.socketpair()
    frames = [(broker_wire.OUT, b'{"decision": '), (broker_wire.OUT, b'"reject"}\n')]
    frames += [(broker_wire.ERR, b"a line for people\n"), (broker_wire.EXIT, b"0")]
    for kind, body in frames:
        there.sendall(broker_wire._HEADER.pack(kind, len(body)) + body)
    there.close()
    monkeypatch.setenv(BROKER_ENV, "3")
    monkeypatch.setattr(broker_wire, "forward", lambda fd, argv, cwd: broker_wire._relay(here))
    try:
        with (tmp_path / "out").open("w") as out:
            monkeypatch.setattr("sys.stdout", _ClosedPipe(out.fileno()))
            code = main(["spend"])
    finally:
        here.close()
    assert code == exitcodes.PIPE_CLOSED == 141
    assert capsys.readouterr().err == "a line for people\n"
