"""examples/openai_agent against a loopback stand-in of an OpenAI-compatible endpoint.

The stand-in (the example's ``standin_server.py``) runs in a thread of this process on
127.0.0.1 with a random port; its answers depend on the system prompt, it returns token usage
and keeps a ledger of it, and faults (429, 500, a held request) are injected per request.
"""

from __future__ import annotations

import threading
import urllib.request

import pytest
from openai_example import EXAMPLE, PRICE_IN, PRICE_OUT, _module

from pytest_capevolve._cli.main import main

openai_adapter = _module("adapter")


def _client(standin, **overrides):
    settings = openai_adapter.Settings(
        base_url=standin.base_url,
        api_key="k",
        model="standin-small",
        input_usd_per_mtok=PRICE_IN,
        output_usd_per_mtok=PRICE_OUT,
        **overrides,
    )
    waits: list[float] = []
    return openai_adapter.ChatClient(settings, sleep=waits.append), waits


BODY = {
    "model": "standin-small",
    "seed": 3,
    "messages": [
        {"role": "system", "content": "Reply with only the final answer."},
        {"role": "user", "content": "What is 17 + 25?"},
    ],
}


def test_retry_after_is_honoured_and_capped_then_the_answer_counts(standin):
    standin.fault = lambda body, attempt: 429 if attempt < 2 else None
    standin.retry_after = "7"
    client, waits = _client(standin, max_backoff_s=5.0)
    reply = client.complete(BODY)
    assert (reply.text, reply.attempts, waits) == ("42", 3, [5.0, 5.0])
    standin.retry_after = "2"
    client, waits = _client(standin, max_backoff_s=5.0)
    client.complete({**BODY, "seed": 4})
    assert waits == [2.0, 2.0]


def test_server_errors_back_off_exponentially_and_give_up_as_an_infra_error(standin):
    standin.fault = lambda body, attempt: 500
    client, waits = _client(standin, backoff_s=1.0, max_backoff_s=6.0, max_retries=4)
    with pytest.raises(openai_adapter.EndpointError, match="HTTP 500.*gave up after 5 attempts"):
        client.complete(BODY)
    assert waits == [1.0, 2.0, 4.0, 6.0] and standin.statuses == [500] * 5  # a sleep before each retry


def test_a_client_error_is_not_retried(standin):
    standin.fault = lambda body, attempt: 401
    client, waits = _client(standin)
    with pytest.raises(openai_adapter.EndpointError, match="HTTP 401"):
        client.complete(BODY)
    assert standin.statuses == [401] and waits == []


def test_a_held_request_times_out_and_is_retried_once(standin):
    arrived, release = threading.Event(), threading.Event()

    def hold_first(body, attempt):
        if attempt == 0:
            arrived.set()
            release.wait()
        return None

    standin.fault = hold_first
    client, waits = _client(standin, request_timeout_s=0.5, backoff_s=0.0)
    try:
        reply = client.complete(BODY)
    finally:
        release.set()
    # the held first attempt timed out; a retry answered (more than one only on a machine so
    # loaded that an unheld loopback request took longer than the timeout)
    assert arrived.is_set() and reply.attempts >= 2 and reply.text == "42"
    assert len(waits) == reply.attempts - 1


def test_a_rollout_that_gives_up_is_an_infra_error_never_a_zero(standin, tmp_path):
    standin.fault = lambda body, attempt: 429
    adapter = object.__new__(openai_adapter.OpenAIChatAdapter)
    adapter.settings = _client(standin, max_retries=1)[0].settings
    adapter.client = openai_adapter.ChatClient(adapter.settings, sleep=lambda s: None)
    (tmp_path / "prompt.md").write_text("Reply with only the final answer.")
    task = adapter.tasks("all")[0]
    rollout = adapter.run_target(task, tmp_path, seed=0)
    assert rollout.error and "HTTP 429" in rollout.error and rollout.cost_usd == 0.0


def test_without_an_endpoint_the_example_refuses_before_any_network(repo, monkeypatch, capsys):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)

    def no_network(*args, **kwargs):
        raise AssertionError("the example reached for the network")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    assert main(["check", str(repo / "examples" / "openai_agent")]) == 1
    out = capsys.readouterr().out
    assert "set OPENAI_BASE_URL" in out and out.count("\n") <= 3


def test_the_readme_commands_run_in_the_venv_the_main_readme_makes():
    """A new user has no `python` or `pytest` on PATH with the plugin in it: the commands use the
    `.venv` the main README's first command makes, as the main README's own commands do."""
    text = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    blocks = text.split("```")[1::2]
    commands = [line.strip() for block in blocks for line in block.splitlines() if line.strip()]
    runs = [c for c in commands if c.split()[0].rsplit("/", 1)[-1] in ("python", "python3", "pytest")]
    assert runs and all(c.startswith("../../.venv/bin/") for c in runs), runs
    main_readme = (EXAMPLE.parent.parent / "README.md").read_text(encoding="utf-8")
    assert "python3 -m venv .venv" in main_readme.split("```")[1]  # the first command makes it
