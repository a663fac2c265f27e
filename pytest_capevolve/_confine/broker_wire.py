"""The wire across the boundary: a confined agent asks the broker outside to run a command.

``capevolve agent`` keeps one end of a datagram socket pair and the agent inherits the other
(:data:`BROKER_ENV`). A ``capevolve`` command inside (:func:`forward`) sends its argv and cwd
in one JSON datagram with one end of a private stream pair, and reads back its stdout, stderr
and exit code. The broker (:func:`requests`, :func:`Reply`) runs it outside the boundary;
nothing but argv and cwd reaches it. What may run is the allowlist's business
(:mod:`.._cli.broker_policy`). Imports nothing of ours."""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import struct
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

BROKER_ENV = "CAPEVOLVE_BROKER_FD"  # the inherited control socket's number, inside an agent
_MAX_REQUEST = 1 << 20
_HEADER = struct.Struct("!cI")  # kind, length
OUT, ERR, EXIT = b"o", b"e", b"x"


class BrokerGone(Exception):
    """The control socket is not there (closed, or the agent outlived its broker)."""


class BrokerNotInherited(BrokerGone):
    """The control socket's number names no socket in this process: a program between
    ``capevolve agent`` and this command closed it (Python's ``subprocess`` does by default)."""


def broker_fd() -> int | None:
    """The control socket's number when this process runs inside ``capevolve agent``."""
    value = os.environ.get(BROKER_ENV, "")
    return int(value) if value.isdigit() else None


def control_pair() -> tuple[socket.socket, socket.socket]:
    """(the broker's end, the agent's end); the agent's end is inheritable."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    theirs.set_inheritable(True)
    return mine, theirs


def forward(fd: int, argv: list[str], cwd: str) -> int:
    """Send ``argv`` (without ``capevolve``) to the broker on ``fd``, copy its output here and
    return its exit code; :class:`BrokerGone` when there is no broker."""
    try:
        control = socket.socket(fileno=os.dup(fd))
    except OSError as exc:
        if exc.errno in (errno.EBADF, errno.ENOTSOCK):
            raise BrokerNotInherited(
                f"descriptor {fd} ({BROKER_ENV}) is not the broker's socket here: a program between "
                "`capevolve agent` and this command closed it (Python's subprocess does unless given "
                f"pass_fds=({fd},) or close_fds=False); keep it open, or run capevolve from a shell"
            ) from None
        raise BrokerGone(f"descriptor {fd}: {exc.strerror}") from None
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        request = json.dumps({"argv": argv, "cwd": cwd}).encode("utf-8")
        try:
            socket.send_fds(control, [request], [there.fileno()])
        except OSError as exc:
            raise BrokerGone(exc.strerror or str(exc)) from None
        finally:
            there.close()
            control.close()
        return _relay(here)
    finally:
        here.close()


def _relay(conn: socket.socket) -> int:
    """Copy the command's frames here until its exit code. A reader of stdout that went away (`| head`)
    stops the copy of stdout only: stderr still arrives, the command runs to its end outside, and the
    closed pipe is raised then (the CLI's one handler for it), never a traceback mid-copy."""
    with conn.makefile("rb") as reader:
        closed: BrokenPipeError | None = None
        while True:
            head = reader.read(_HEADER.size)
            if len(head) < _HEADER.size:
                raise BrokerGone(
                    "it closed this request before its exit code; it stops writing to a reader that "
                    "reads nothing for minutes, and what the command records is kept"
                )
            kind, length = _HEADER.unpack(head)
            body = reader.read(length)
            if kind == EXIT:
                if closed is not None:
                    raise closed
                sys.stdout.flush()
                sys.stderr.flush()
                return int(body.decode("ascii"))
            if kind == OUT and closed is not None:
                continue
            stream = sys.stdout if kind == OUT else sys.stderr
            try:
                stream.buffer.write(body)
                stream.buffer.flush()
            except BrokenPipeError as exc:
                if kind != OUT:
                    raise
                closed = exc


@dataclass
class Request:
    """One command the agent asked for, with the private connection to answer on."""

    argv: list[str]
    cwd: str
    reply: Reply


def requests(control: socket.socket) -> Iterator[Request | str]:
    """Each request arriving on ``control`` until it is closed or shut; a malformed one is its
    reason (a string), answered by nobody (it has no connection to answer on)."""
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, _MAX_REQUEST, 4)
        except OSError:
            return
        if not data and not fds:
            return
        conn = None
        for fd in fds:
            if conn is None and stat.S_ISSOCK(os.fstat(fd).st_mode):
                conn = socket.socket(fileno=fd)
            else:
                os.close(fd)
        if conn is None:
            yield "a request without its connection"
            continue
        try:
            fields = json.loads(data.decode("utf-8"))
            argv, cwd = fields["argv"], fields["cwd"]
            if not (isinstance(argv, list) and all(isinstance(a, str) for a in [*argv, cwd])):
                raise ValueError
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            Reply(conn).finish("error: capevolve agent: a malformed request\n", 4)
            continue
        yield Request(argv, cwd, Reply(conn))


class Reply:
    """The broker's answer to one request, in frames. A client that went away or stalls for
    ``timeout`` is dropped, but its command runs on: what it records is not the agent's to cut."""

    def __init__(self, conn: socket.socket, timeout: float = 300.0) -> None:
        self.conn: socket.socket | None = conn
        self.lock = threading.Lock()  # stdout and stderr are pumped by two threads
        conn.settimeout(timeout)

    def send(self, kind: bytes, body: bytes) -> None:
        with self.lock:
            if self.conn is None:
                return
            try:
                self.conn.sendall(_HEADER.pack(kind, len(body)) + body)
            except OSError:
                self.conn.close()
                self.conn = None

    def out(self, text: bytes) -> None:
        self.send(OUT, text)

    def err(self, text: bytes) -> None:
        self.send(ERR, text)

    def finish(self, error: str | None, code: int) -> None:
        if error:
            self.err(error.encode("utf-8"))
        self.send(EXIT, str(int(code)).encode("ascii"))
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None
