"""An agent that is one call to an OpenAI-compatible chat-completions endpoint, stdlib only.

The candidate's ``prompt.md`` is the system prompt; the task is the user message. Settings come
from ``openai.yaml`` beside the spec, and the environment wins over it: ``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``OPENAI_MODEL``. There is no default endpoint: without a base URL the
adapter refuses to start (one line saying what to set) rather than reach the network.

Cost is measured, not guessed: the usage the endpoint returns × the price table in
``openai.yaml`` (USD per million tokens). A model without a price is refused: unmetered is
not free.

A rate limit (429), a server error (5xx), a timeout or a dropped connection is retried with
exponential backoff, honouring ``Retry-After`` (both capped by ``max_backoff_s``), at most
``max_retries`` times; after that the rollout carries ``error`` — an infra error, missing data
that the next session pays again, never a reward of 0. Any other HTTP error (401, 404, ...)
is an infra error at once.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_capevolve import Rollout, Score, Task

RETRIED_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class EndpointError(Exception):
    """The endpoint gave no answer (after the retries it was worth)."""


@dataclass(frozen=True)
class Settings:
    base_url: str
    api_key: str
    model: str
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    temperature: float = 0.0
    request_timeout_s: float = 60.0
    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0

    @classmethod
    def load(cls, project_dir: Path, environ: dict[str, str]) -> Settings:
        path = project_dir / "openai.yaml"
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        base_url = environ.get("OPENAI_BASE_URL") or config.get("base_url")
        if not base_url:
            raise RuntimeError(
                f"no endpoint: set OPENAI_BASE_URL (e.g. https://api.openai.com/v1, or a local "
                f"server's http://127.0.0.1:PORT/v1) and OPENAI_API_KEY, or base_url in {path}"
            )
        model = environ.get("OPENAI_MODEL") or config.get("model")
        prices = (config.get("prices") or {}).get(model)
        if not prices:
            raise RuntimeError(
                f"no price for model {model!r} in {path} (prices: {sorted(config.get('prices') or {})}); "
                "add its USD per million input and output tokens (0 for a local model)"
            )
        return cls(
            base_url=str(base_url).rstrip("/"),
            api_key=environ.get("OPENAI_API_KEY") or str(config.get("api_key") or ""),
            model=str(model),
            input_usd_per_mtok=float(prices["input"]),
            output_usd_per_mtok=float(prices["output"]),
            temperature=float(config.get("temperature", 0.0)),
            request_timeout_s=float(config.get("request_timeout_s", 60.0)),
            max_retries=int(config.get("max_retries", 4)),
            backoff_s=float(config.get("backoff_s", 1.0)),
            max_backoff_s=float(config.get("max_backoff_s", 30.0)),
        )

    def cost_usd(self, usage: dict[str, Any]) -> float:
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        return (prompt * self.input_usd_per_mtok + completion * self.output_usd_per_mtok) / 1_000_000


@dataclass
class Reply:
    text: str
    usage: dict[str, Any]
    attempts: int
    waited_s: list[float] = field(default_factory=list)


class ChatClient:
    """POSTs one chat completion, retrying what is worth retrying. ``sleep`` is injectable so
    a test can see the waits without waiting them."""

    def __init__(self, settings: Settings, sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self.sleep = sleep

    def complete(self, body: dict[str, Any]) -> Reply:
        s = self.settings
        waits: list[float] = []
        problem = ""
        for attempt in range(s.max_retries + 1):
            if attempt:
                self.sleep(waits[-1])
            try:
                payload = self._post(body)
            except urllib.error.HTTPError as exc:
                problem = f"HTTP {exc.code} {_error_text(exc)}"
                if exc.code not in RETRIED_STATUSES:
                    raise EndpointError(problem) from None
                waits.append(self._wait(attempt, exc.headers.get("Retry-After")))
                continue
            except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as exc:
                problem = f"no answer ({getattr(exc, 'reason', exc)})"
                waits.append(self._wait(attempt, None))
                continue
            try:
                text = payload["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                raise EndpointError(f"unreadable completion: {str(payload)[:200]}") from None
            return Reply(str(text or ""), dict(payload.get("usage") or {}), attempt + 1, list(waits))
        raise EndpointError(f"{problem}; gave up after {s.max_retries + 1} attempts")

    def _post(self, body: dict[str, Any]) -> Any:
        s = self.settings
        request = urllib.request.Request(
            f"{s.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {s.api_key}"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=s.request_timeout_s) as response:
            return json.loads(response.read())

    def _wait(self, attempt: int, retry_after: str | None) -> float:
        """Seconds before the next attempt: the server's Retry-After when it says one, else
        exponential backoff; never more than ``max_backoff_s``."""
        s = self.settings
        wait = s.backoff_s * 2**attempt
        if retry_after is not None:
            try:
                wait = max(0.0, float(retry_after))
            except ValueError:
                pass  # an HTTP date: keep the backoff
        return min(wait, s.max_backoff_s)


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return json.loads(exc.read())["error"]["message"]
    except Exception:
        return str(exc.reason)


QUESTIONS = [
    ("sum-a", "What is 17 + 25?", "42"),
    ("sum-b", "What is 38 * 3?", "114"),
    ("sum-c", "What is 91 - 46?", "45"),
    ("sum-d", "What is 12 * 12?", "144"),
    ("sum-e", "What is 250 + 175?", "425"),
    ("sum-f", "What is 63 - 27?", "36"),
    ("sum-g", "What is 14 * 15?", "210"),
    ("sum-h", "What is 808 - 99?", "709"),
    ("sum-i", "What is 45 + 67?", "112"),
    ("sum-j", "What is 9 * 13?", "117"),
    ("sum-k", "What is 300 - 123?", "177"),
    ("sum-l", "What is 56 + 78?", "134"),
    ("date-a", "What date is 10 days after March 5, 2024?", "2024-03-15"),
    ("date-b", "What date is 30 days after January 15, 2024?", "2024-02-14"),
    ("date-c", "What date is 2 days after February 27, 2024?", "2024-02-29"),
    ("date-d", "What date is 7 days after December 28, 2023?", "2024-01-04"),
    ("date-e", "What date is 45 days after June 1, 2024?", "2024-07-16"),
    ("date-f", "What date is 3 days after October 30, 2024?", "2024-11-02"),
    ("date-g", "What date is 14 days after April 20, 2024?", "2024-05-04"),
    ("date-h", "What date is 60 days after August 1, 2024?", "2024-09-30"),
    ("date-i", "What date is 5 days after November 28, 2024?", "2024-12-03"),
    ("date-j", "What date is 20 days after May 15, 2024?", "2024-06-04"),
    ("date-k", "What date is 90 days after January 1, 2024?", "2024-03-31"),
    ("date-l", "What date is 12 days after July 25, 2024?", "2024-08-06"),
]


class OpenAIChatAdapter:
    def __init__(self, project_dir: Path) -> None:
        self.settings = Settings.load(Path(project_dir), dict(os.environ))
        self.client = ChatClient(self.settings)

    def tasks(self, split: str) -> list[Task]:
        return [Task(id=tid, input=question, target=gold) for tid, question, gold in QUESTIONS]

    def run_target(self, task: Task, ctx: Path, *, seed: int) -> Rollout:
        system = (Path(ctx) / "prompt.md").read_text(encoding="utf-8")
        body = {
            "model": self.settings.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": task.input}],
            "temperature": self.settings.temperature,
            "seed": seed,
        }
        try:
            reply = self.client.complete(body)
        except EndpointError as exc:
            return Rollout(task_id=task.id, error=str(exc))
        return Rollout(
            task_id=task.id,
            output=reply.text,
            cost_usd=self.settings.cost_usd(reply.usage),
            tokens=int(reply.usage.get("total_tokens") or 0),
            trace={"usage": reply.usage, "attempts": reply.attempts},
        )

    def score(self, task: Task, rollout: Rollout) -> Score:
        said = str(rollout.output).strip()
        if said == task.target:
            return Score(reward=1.0, feedback="exact answer")
        if task.target in said:
            return Score(reward=0.5, feedback="right value, but not only the answer: the reply adds words")
        return Score(reward=0.0, feedback=f"wrong or unreadable answer: {said[:80]!r}")
