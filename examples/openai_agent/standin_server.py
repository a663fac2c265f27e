"""A stand-in for an OpenAI-compatible chat-completions endpoint, on 127.0.0.1 only.

It answers ``POST <base>/chat/completions`` the way a small model might, deterministically:
the answer depends on the system prompt (so a better prompt really scores better), on the
question and on the request's ``seed`` (an occasional slip, the same for every prompt at a
given seed, as a sampled model with common random numbers would make). It returns token usage
like the real API, and keeps a ledger of every usage it returned.

Run it to try the example without an API key:

    python standin_server.py            # prints the OPENAI_BASE_URL to export

Tests start it in a thread (``StandIn().start()``) and inject faults through ``fault``: a
function of (request body, attempt number for that exact request) returning an HTTP status
(429, 500, ...) to answer with instead, ``MALFORMED`` (a 200 whose completion has no choices),
or None; it may block on an Event to hold a request. Every fault answer carries
``retry-after-ms`` (``retry_after_ms``, as OpenAI's API sends it), which the openai client
honours: a test's retries wait a millisecond, not the client's 0.5 s backoff.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "standin-small"
MALFORMED = "malformed"  # a fault that answers 200 with a completion missing its choices
Fault = Callable[[dict[str, Any], int], "int | str | None"]

_SUM = re.compile(r"What is (\d+) ([+*-]) (\d+)\?")
_DATE = re.compile(r"What date is (\d+) days after (\w+ \d+, \d{4})\?")


def answer(system: str, user: str, seed: int) -> str:
    """What the stand-in model says. Rules it follows only when the system prompt says so:
    "only the final answer" (else it chats around the answer) and "YYYY-MM-DD" (else it
    writes dates in words). At some seeds it slips by one, whatever the prompt."""
    rules = system.lower()
    terse = "only the final answer" in rules
    if match := _SUM.search(user):
        a, op, b = int(match[1]), match[2], int(match[3])
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        if _slips(user, seed):
            value += 1
        result = str(value)
    elif match := _DATE.search(user):
        start = datetime.datetime.strptime(match[2], "%B %d, %Y").date()
        day = start + datetime.timedelta(days=int(match[1]) + _slips(user, seed))
        iso = "yyyy-mm-dd" in rules
        result = day.isoformat() if iso else f"{day:%B} {day.day}, {day.year}"
    else:
        result = "I do not know."
    return result if terse else f"Sure! Let me work that out. The answer is {result}."


def _slips(user: str, seed: int) -> bool:
    digest = hashlib.sha256(f"{seed}|{user}".encode()).digest()
    return digest[0] < 40  # about one request in six


def count_tokens(text: str) -> int:
    """The stand-in's tokenizer: one token per whitespace-separated word."""
    return len(text.split())


class StandIn:
    """The server and its ledger. ``usage`` lists (prompt_tokens, completion_tokens) of every
    answer it gave (errors carry none); ``attempts`` counts requests per exact body."""

    def __init__(self, fault: Fault | None = None, model: str = MODEL) -> None:
        self.fault = fault
        self.model = model
        self.retry_after_ms: str | None = "1"  # the retry-after-ms every fault carries (None: none)
        # the message a fault answer carries (None: "stand-in fault STATUS"); some endpoints and
        # proxies echo the request's key in it ("Incorrect API key provided: sk-...")
        self.fault_message: str | None = None
        self.usage: list[tuple[int, int]] = []
        self.statuses: list[int] = []
        self.attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the stand-in first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> StandIn:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                standin._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: tests and the example read the ledger, not a log

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                # a client that gave up (its own timeout: what the fault tests provoke) closed the
                # socket before the reply; anything else is printed as http.server does
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.path.rstrip("/") != "/v1/chat/completions":
            return self._reply(handler, 404, {"error": {"message": f"no route {handler.path}"}})
        length = int(handler.headers.get("Content-Length") or 0)
        try:
            body = json.loads(handler.rfile.read(length))
            system = next(m["content"] for m in body["messages"] if m["role"] == "system")
            user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        except (ValueError, KeyError, StopIteration, TypeError):
            return self._reply(handler, 400, {"error": {"message": "need a system and a user message"}})
        key = json.dumps(body, sort_keys=True)
        with self._lock:
            attempt = self.attempts.get(key, 0)
            self.attempts[key] = attempt + 1
        status = self.fault(body, attempt) if self.fault is not None else None
        if status == MALFORMED:
            return self._reply(handler, 200, {"id": "chatcmpl-x", "object": "chat.completion", "choices": []})
        if status is not None:
            headers = {"retry-after-ms": self.retry_after_ms} if self.retry_after_ms is not None else {}
            said = self.fault_message or f"stand-in fault {status}"
            message = {"error": {"message": said, "type": "standin"}}
            return self._reply(handler, int(status), message, headers)
        text = answer(system, user, int(body.get("seed") or 0))
        prompt_tokens = count_tokens(system) + count_tokens(user)
        completion_tokens = count_tokens(text)
        with self._lock:
            self.usage.append((prompt_tokens, completion_tokens))
        self._reply(
            handler,
            200,
            {
                "id": f"chatcmpl-{len(self.usage)}",
                "object": "chat.completion",
                "model": self.model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )

    def _reply(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        with self._lock:
            self.statuses.append(status)
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)


if __name__ == "__main__":
    server = StandIn().start()
    print(f"export OPENAI_BASE_URL={server.base_url} OPENAI_API_KEY=standin", flush=True)
    print("serving until Ctrl-C", file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
