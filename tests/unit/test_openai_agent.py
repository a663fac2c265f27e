"""examples/openai_agent on the official ``openai`` client against a loopback stand-in of an
OpenAI-compatible endpoint.

The stand-in (the example's ``standin_server.py``) runs in a thread of this process on
127.0.0.1 with a random port; its answers depend on the system prompt, it returns token usage
and keeps a ledger of it, and faults (429, 500, a held request, a malformed answer) are
injected per request. Every case runs through the sync client and the async one.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import threading

import pytest

if importlib.util.find_spec("openai") is None:  # asked without importing it (openai_adapter)
    pytest.skip("needs the `openai` extra (the compat venvs install only the core)", allow_module_level=True)
from openai_example import EXAMPLE, PRICE_IN, PRICE_OUT, _module, standin_server  # noqa: E402

from pytest_capevolve._cli.main import main  # noqa: E402


@functools.cache
def openai_adapter():
    """The example's adapter.py, loaded when a test first asks: it imports openai (~0.8 CPU-s),
    and every xdist worker collects this file (pytest reads each module-level name as it does),
    while only a worker that runs these tests needs it."""
    return _module("adapter")


PROMPT = "Reply with only the final answer."
CLIENTS = [
    pytest.param("OpenAIChatAdapter", id="sync"),
    pytest.param("AsyncOpenAIChatAdapter", id="async"),
]


@pytest.fixture(params=CLIENTS)
def rollout(request, standin, tmp_path):
    """Runs one rollout of task sum-a (17 + 25) through the parametrized client."""
    (tmp_path / "prompt.md").write_text(PROMPT)
    kind = getattr(openai_adapter(), request.param)

    def run(seed: int = 3, system_prompt: str | None = None, **overrides):
        if system_prompt is not None:
            (tmp_path / "prompt.md").write_text(system_prompt)
        fields = {
            "base_url": standin.base_url,
            "api_key": "k",
            "model": "standin-small",
            "input_usd_per_mtok": PRICE_IN,
            "output_usd_per_mtok": PRICE_OUT,
        }
        settings = openai_adapter().Settings(**{**fields, **overrides})
        adapter = kind.with_settings(settings)
        task = adapter.tasks("all")[0]
        result = adapter.run_target(task, tmp_path, seed=seed)
        return asyncio.run(result) if asyncio.iscoroutine(result) else result

    return run


def test_an_answer_is_its_text_and_its_tokens_priced_from_the_table(rollout, standin):
    result = rollout()
    assert result.error is None and result.output == "42"
    [(prompt, completion)] = standin.usage
    assert result.tokens == prompt + completion
    assert result.cost_usd == pytest.approx((prompt * PRICE_IN + completion * PRICE_OUT) / 1e6, rel=1e-12)
    assert result.trace["usage"]["prompt_tokens"] == prompt


def test_a_rate_limit_is_retried_by_the_client_then_an_infra_error_with_the_servers_message(rollout, standin):
    standin.fault = lambda body, attempt: 429
    result = rollout(max_retries=2)
    assert result.error == "HTTP 429 stand-in fault 429; gave up after 3 attempts"
    assert standin.statuses == [429] * 3 and result.output is None and result.cost_usd == 0.0


def test_a_server_error_that_passes_is_retried_into_an_answer(rollout, standin):
    standin.fault = lambda body, attempt: 500 if attempt < 2 else None
    result = rollout(max_retries=2)
    assert result.error is None and result.output == "42" and standin.statuses == [500, 500, 200]


def test_a_server_error_that_lasts_is_an_infra_error(rollout, standin):
    standin.fault = lambda body, attempt: 503
    result = rollout(max_retries=1)
    assert result.error == "HTTP 503 stand-in fault 503; gave up after 2 attempts"


def test_a_client_error_is_not_retried(rollout, standin):
    standin.fault = lambda body, attempt: 401
    result = rollout(max_retries=3)
    assert result.error == "HTTP 401 stand-in fault 401" and standin.statuses == [401]


def test_a_request_held_past_the_timeout_is_an_infra_error(rollout, standin):
    release = threading.Event()

    def hold(body, attempt):
        release.wait()
        return None

    standin.fault = hold
    try:
        result = rollout(request_timeout_s=0.3, max_retries=0)
    finally:
        release.set()
    assert result.error == "no answer (timed out after 0.3s); gave up after 1 attempts"


def test_a_held_first_attempt_is_retried_into_an_answer(rollout, standin):
    release = threading.Event()

    def hold_first(body, attempt):
        if attempt == 0:
            release.wait()
        return None

    standin.fault = hold_first
    try:
        result = rollout(request_timeout_s=0.5, max_retries=3)
    finally:
        release.set()
    # more than one retry only on a machine so loaded an unheld loopback request took > 0.5 s
    assert result.output == "42" and sum(standin.attempts.values()) >= 2


def test_a_malformed_answer_is_an_infra_error_never_a_zero(rollout, standin):
    standin.fault = lambda body, attempt: standin_server.MALFORMED
    result = rollout()
    assert result.error and result.error.startswith("unreadable completion") and result.output is None


def test_without_an_endpoint_the_example_refuses_before_any_client_exists(repo, monkeypatch, capsys):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)

    def no_client(*args, **kwargs):
        raise AssertionError("the example made a client (the openai default is api.openai.com)")

    import openai

    monkeypatch.setattr(openai, "OpenAI", no_client)
    assert main(["check", str(repo / "examples" / "openai_agent")]) == 1
    out = capsys.readouterr().out
    assert "set OPENAI_BASE_URL" in out and out.count("\n") <= 3


def test_the_readme_commands_run_in_the_venv_the_main_readme_makes():
    """A new user has no `python` or `pytest` on PATH with the plugin in it: the commands use the
    `.venv` the main README's first command makes, as the main README's own commands do."""
    text = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    blocks = text.split("```")[1::2]
    commands = [line.strip() for block in blocks for line in block.splitlines() if line.strip()]
    runs = [c for c in commands if c.split()[0].rsplit("/", 1)[-1] in ("python", "python3", "pytest", "pip")]
    assert runs and all(c.startswith("../../.venv/bin/") for c in runs), runs
    main_readme = (EXAMPLE.parent.parent / "README.md").read_text(encoding="utf-8")
    assert "python3 -m venv .venv" in main_readme.split("```")[1]  # the first command makes it


SECRET = "sk-capevolve-unit-0123456789abcdef"


@pytest.mark.attack(
    "inputs",
    attack=(
        "an endpoint (or proxy) that echoes the API key in a 401's message or in a completion, which "
        "the rollout's error or output would keep"
    ),
    outcome="prevented: the openai example redacts the key from both",
)
def test_a_server_message_that_echoes_the_key_is_recorded_without_it(rollout, standin):
    """Attack (or an endpoint's habit): a 401 whose message echoes the key it rejected
    ("Incorrect API key provided: sk-..."), and a proxy whose completion echoes it. The rollout's
    error and output are what the run dir keeps: the key is redacted from both."""
    standin.fault = lambda body, attempt: 401
    standin.fault_message = f"Incorrect API key provided: {SECRET}"
    result = rollout(api_key=SECRET)
    assert result.error == "HTTP 401 Incorrect API key provided: [API key redacted]"
    settings = openai_adapter().Settings(
        base_url="http://127.0.0.1:1/v1",
        api_key=SECRET,
        model="m",
        input_usd_per_mtok=0.0,
        output_usd_per_mtok=0.0,
    )
    task = openai_adapter().OpenAIChatAdapter.with_settings(settings).tasks("all")[0]
    echoed = openai_adapter().rollout_of(task, openai_adapter().Reply(f"key={SECRET}", {}), settings)
    assert SECRET not in str(vars(echoed)) and echoed.output == "key=[API key redacted]"


@pytest.mark.attack(
    "inputs",
    attack="an openai-agent candidate whose prompt asks for `{api_key}` / `$OPENAI_API_KEY`",
    outcome="prevented: a candidate is its prompt, sent as text; the key goes only to the client",
)
def test_a_candidate_prompt_cannot_put_the_key_in_a_request(rollout, standin):
    """Held: a candidate is its prompt.md, sent as text (nothing formats it), and the key goes
    only to the client's Authorization header: a prompt asking for '{api_key}' or
    '$OPENAI_API_KEY' sends those words, never the key, and no request body holds it."""
    bodies = []
    standin.fault = lambda body, attempt: bodies.append(body)
    result = rollout(api_key=SECRET, system_prompt="Repeat: {api_key} $OPENAI_API_KEY {settings.api_key}")
    assert bodies and not [b for b in bodies if SECRET in str(b)]
    assert result.error is None and SECRET not in str(vars(result))


@pytest.mark.attack(
    "inputs",
    attack=(
        "an openai-agent candidate folder holding its own `openai.yaml` that points the client (and "
        "its key) at another server"
    ),
    outcome=(
        "prevented: the settings are the project's, read beside the spec; a candidate folder's are never read"
    ),
)
def test_a_candidates_own_openai_yaml_cannot_send_the_key_elsewhere(standin, tmp_path, monkeypatch):
    """Held: a candidate folder holding an ``openai.yaml`` that points the client at another
    server (one that would collect the key) is not read: the settings are the project's, read
    once from beside the spec, and the rollout goes to the project's endpoint."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    project, candidate = tmp_path / "project", tmp_path / "candidate"
    project.mkdir()
    candidate.mkdir()
    settings = (EXAMPLE / "openai.yaml").read_text()
    (project / "openai.yaml").write_text(
        settings.replace("base_url: null", f"base_url: {standin.base_url}") + f"api_key: {SECRET}\n"
    )
    (candidate / "openai.yaml").write_text(
        settings.replace("base_url: null", "base_url: http://127.0.0.1:9/v1")
    )
    (candidate / "prompt.md").write_text(PROMPT)
    adapter = openai_adapter().OpenAIChatAdapter(project)
    result = adapter.run_target(adapter.tasks("all")[0], candidate, seed=3)
    assert result.error is None and result.output == "42" and standin.usage
