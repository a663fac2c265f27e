"""An agent that is one call to an OpenAI-compatible chat-completions endpoint, through the
official ``openai`` client (``pip install 'pytest-capevolve[openai]'``).

The candidate's ``prompt.md`` is the system prompt; the task is the user message; the trial's
seed is sent as ``seed``. Settings come from ``openai.yaml`` beside the spec, and the
environment wins over it: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``OPENAI_MODEL``. There is
no default endpoint: without a base URL the adapter refuses to start (one line saying what to
set) rather than reach the network — the ``openai`` client's own default is api.openai.com.

Two classes, one behaviour: :class:`OpenAIChatAdapter` uses ``openai.OpenAI`` (sync; rollouts
overlap only across xdist workers), :class:`AsyncOpenAIChatAdapter` uses ``openai.AsyncOpenAI``
(``async def run_target``: ``--capevolve-concurrency N`` keeps N requests in flight per worker).

Cost is measured, not guessed: the usage the endpoint returns × the price table in
``openai.yaml`` (USD per million tokens). A model without a price is refused: unmetered is
not free.

Retries and timeouts are the client's own (``max_retries``, ``timeout``): it retries 408, 409,
429, 5xx, timeouts and dropped connections with exponential backoff, honouring the server's
``Retry-After``/``retry-after-ms``. When it gives up the rollout carries ``error`` with the
status and the server's own message — an infra error, missing data that the next session pays
again, never a reward of 0. So does an answer the adapter cannot read (no choices, no text).

The API key goes to the client and nowhere else: not into a rollout's trace, output or error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_capevolve import Rollout, Score, Task

try:
    import openai
except ImportError as exc:  # the adapter module is imported when a session collects
    raise RuntimeError(
        "examples/openai_agent needs the official client: pip install 'pytest-capevolve[openai]'"
    ) from exc

# the statuses the openai client retries before it gives up (its _should_retry)
RETRIED_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class EndpointError(Exception):
    """The endpoint gave no usable answer (after the retries the client makes)."""


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
            # the client refuses an empty key; a local server ignores whatever is sent
            api_key=environ.get("OPENAI_API_KEY") or str(config.get("api_key") or "unset"),
            model=str(model),
            input_usd_per_mtok=float(prices["input"]),
            output_usd_per_mtok=float(prices["output"]),
            temperature=float(config.get("temperature", 0.0)),
            request_timeout_s=float(config.get("request_timeout_s", 60.0)),
            max_retries=int(config.get("max_retries", 4)),
        )

    def cost_usd(self, usage: dict[str, Any]) -> float:
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        return (prompt * self.input_usd_per_mtok + completion * self.output_usd_per_mtok) / 1_000_000

    def client_options(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "api_key": self.api_key,
            "max_retries": self.max_retries,
            "timeout": self.request_timeout_s,
        }


@dataclass
class Reply:
    text: str
    usage: dict[str, Any]


def request(settings: Settings, system: str, question: str, seed: int) -> dict[str, Any]:
    """The chat-completions arguments of one rollout (no key: the client holds it)."""
    return {
        "model": settings.model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "temperature": settings.temperature,
        "seed": seed,
    }


def read_reply(completion: Any) -> Reply:
    """The text and usage of a completion, or an EndpointError saying what was unreadable.
    The client builds its response models without validating them, so a 200 answer missing
    its choices or its message arrives here as an object with holes."""
    try:
        text = completion.choices[0].message.content
        usage = completion.usage.model_dump() if completion.usage is not None else {}
    except (AttributeError, IndexError, TypeError, KeyError):
        raise EndpointError(f"unreadable completion: {str(completion)[:200]}") from None
    if not isinstance(text, str):
        raise EndpointError(f"unreadable completion: no text in {str(completion)[:200]}")
    return Reply(text, dict(usage))


def explain(exc: Exception, settings: Settings) -> str:
    """One line for what the client raised, with the server's own message when it sent one
    (the key redacted from it: an endpoint that rejects a key may echo it back)."""
    return redacted(_explained(exc, settings), settings)


def redacted(text: str, settings: Settings) -> str:
    """``text`` without the API key in it. A key shorter than 8 characters is a placeholder
    (``"unset"``, a test's ``"k"``), not a secret, and is left alone: redacting it would
    mangle every answer that holds the letter."""
    key = settings.api_key
    return text.replace(key, "[API key redacted]") if len(key) >= 8 else text


def _explained(exc: Exception, settings: Settings) -> str:
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        said = body.get("message") if isinstance(body, dict) else None
        line = f"HTTP {exc.status_code} {said or exc.message}"
        if exc.status_code in RETRIED_STATUSES:
            line += f"; gave up after {settings.max_retries + 1} attempts"
        return line
    if isinstance(exc, openai.APITimeoutError):
        return (
            f"no answer (timed out after {settings.request_timeout_s}s); "
            f"gave up after {settings.max_retries + 1} attempts"
        )
    if isinstance(exc, openai.APIConnectionError):
        return f"no answer ({exc.message}); gave up after {settings.max_retries + 1} attempts"
    if isinstance(exc, openai.APIResponseValidationError):
        return f"unreadable completion: {exc.message}"
    return str(exc)


def rollout_of(task: Task, reply: Reply, settings: Settings) -> Rollout:
    return Rollout(
        task_id=task.id,
        output=redacted(reply.text, settings),  # a proxy that echoes its request writes no key
        cost_usd=settings.cost_usd(reply.usage),
        tokens=int(reply.usage.get("total_tokens") or 0),
        trace={"usage": reply.usage},
    )


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
    """The agent through ``openai.OpenAI``: one client per adapter, shared by its rollouts."""

    def __init__(self, project_dir: Path) -> None:
        self.settings = Settings.load(Path(project_dir), dict(os.environ))
        self._connect()

    @classmethod
    def with_settings(cls, settings: Settings) -> OpenAIChatAdapter:
        """An adapter on ``settings`` as given (tests and benchmarks), no openai.yaml read."""
        adapter = cls.__new__(cls)
        adapter.settings = settings
        adapter._connect()
        return adapter

    def _connect(self) -> None:
        self.client = openai.OpenAI(**self.settings.client_options())

    def tasks(self, split: str) -> list[Task]:
        return [Task(id=tid, input=question, target=gold) for tid, question, gold in QUESTIONS]

    def run_target(self, task: Task, ctx: Path, *, seed: int) -> Rollout:
        system = (Path(ctx) / "prompt.md").read_text(encoding="utf-8")
        try:
            completion = self.client.chat.completions.create(
                **request(self.settings, system, task.input, seed)
            )
            reply = read_reply(completion)
        except (openai.OpenAIError, EndpointError) as exc:
            return Rollout(task_id=task.id, error=explain(exc, self.settings))
        return rollout_of(task, reply, self.settings)

    def score(self, task: Task, rollout: Rollout) -> Score:
        said = str(rollout.output).strip()
        if said == task.target:
            return Score(reward=1.0, feedback="exact answer")
        if task.target in said:
            return Score(reward=0.5, feedback="right value, but not only the answer: the reply adds words")
        return Score(reward=0.0, feedback=f"wrong or unreadable answer: {said[:80]!r}")


class AsyncOpenAIChatAdapter(OpenAIChatAdapter):
    """The same agent through ``openai.AsyncOpenAI``: ``run_target`` is ``async def``, so one
    worker keeps ``--capevolve-concurrency`` requests in flight. An async client is bound to
    the event loop it runs on and a rollout may get a loop of its own (``capevolve check`` runs
    each under ``asyncio.run``), so each rollout opens and closes its own client."""

    def _connect(self) -> None:
        return None  # a client per rollout (see the class docstring)

    async def run_target(self, task: Task, ctx: Path, *, seed: int) -> Rollout:  # type: ignore[override]
        system = (Path(ctx) / "prompt.md").read_text(encoding="utf-8")
        try:
            async with openai.AsyncOpenAI(**self.settings.client_options()) as client:
                completion = await client.chat.completions.create(
                    **request(self.settings, system, task.input, seed)
                )
            reply = read_reply(completion)
        except (openai.OpenAIError, EndpointError) as exc:
            return Rollout(task_id=task.id, error=explain(exc, self.settings))
        return rollout_of(task, reply, self.settings)
