"""examples/openai_agent against a loopback stand-in of an OpenAI-compatible endpoint.

The stand-in (the example's ``standin_server.py``) runs in a thread of this process on
127.0.0.1 with a random port; its answers depend on the system prompt, it returns token usage
and keeps a ledger of it, and faults (429, 500, a held request) are injected per request.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from pathlib import Path

import pytest

# asked without importing it: the client runs in the sessions' sandbox children, and every
# xdist worker collects this file
if importlib.util.find_spec("openai") is None:
    pytest.skip("needs the `openai` extra (the compat venvs install only the core)", allow_module_level=True)
from openai_example import PRICE_IN, PRICE_OUT  # noqa: E402

from pytest_capevolve._cli.main import main  # noqa: E402


@pytest.fixture
def project(example, standin, monkeypatch):
    """A copy of the example pointed at the stand-in (whose faults say retry-after-ms: 1, so
    the client's retries wait a millisecond), with a key that must never be written."""
    folder = example("openai_agent")
    monkeypatch.setenv("OPENAI_BASE_URL", standin.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    return folder


def _user(body: dict) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def _bucket(body: dict) -> int:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()[0] % 6


KEY = "sk-capevolve-test-0123456789abcdef"  # what the run dir is searched for
OUTAGE = "What is 91 - 46?"  # task sum-c: rate-limited on every attempt while the outage lasts


def flaky(body: dict, attempt: int) -> int | None:
    """An endpoint under load: sum-c always rate-limited; a first attempt of about one request
    in three gets a 429 or a 500 and succeeds when retried."""
    if _user(body) == OUTAGE:
        return 429
    if attempt == 0:
        return {0: 429, 1: 500}.get(_bucket(body))
    return None


def _records(project: Path) -> list[dict]:
    run = sorted((project / ".capevolve" / "runs").iterdir())[-1]
    return [json.loads(p.read_text()) for p in (run / "rollouts" / "val").glob("*.json")]


def _ledger_usd(standin) -> float:
    return sum(p * PRICE_IN + c * PRICE_OUT for p, c in standin.usage) / 1_000_000


@pytest.mark.attack(
    "inputs",
    attack="the API key reaching the run dir",
    outcome="prevented: given only to the client; every file is searched",
)
def test_gate_session_through_the_endpoint_costs_and_rate_limits(
    project, standin, capevolve, projects, capsys
):
    standin.fault = flaky
    # no null controls: byte-identical copies of the seed would only start two more sandbox
    # children a process, each importing openai, and send no request the seed's do not
    none = ["--capevolve-null", "0", "--capevolve-commit", "none"]
    gate_args = dict(gate=True, extra=["-n", "2", *none])
    result = capevolve(project, "terse", "terse_iso", **gate_args)
    out = result.stdout.str()
    # the outage's rollouts are infra errors: missing data, so the session is incomplete (12)
    assert result.ret == 12, out
    assert {429, 500} <= set(standin.statuses) and standin.statuses.count(200) == len(standin.usage)
    result.stdout.fnmatch_lines(
        [
            "terse *ACCEPT*15*",
            "terse_iso *ACCEPT*15*",
            "*infra errors (6; missing data, never a 0)*",
            "*sum-c*HTTP 429*gave up after 5 attempts*",
        ]
    )
    records = _records(project)
    outage = [r for r in records if r["task_id"] == "sum-c"]
    assert len(outage) == 6 and all(r["reward"] is None and "429" in r["infra_error"] for r in outage)
    assert all(r["reward"] is not None for r in records if r["task_id"] != "sum-c")
    # transient 429s and 500s were retried into answers: exactly one answer per valid rollout
    assert len(standin.usage) == len(records) - 6 == 90
    # a better system prompt really scores better, through HTTP
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "terse.json").read_text())
    assert verdict["n_tasks"] == 15 and verdict["per_task"]["sum-c"]["candidate"] is None
    assert verdict["decision"] == "accept" and verdict["delta_mean"] > 0
    # cost = the server's token counts × the price table, rollout by rollout and in total
    assert math.isclose(sum(r["cost_usd"] for r in records), _ledger_usd(standin), rel_tol=1e-9)
    assert sum(r["tokens"] for r in records) == sum(p + c for p, c in standin.usage)
    capsys.readouterr()
    assert main(["spend", str(project)]) == 0
    spend = json.loads(capsys.readouterr().out)
    assert spend["spent"]["runner_usd"] == pytest.approx(_ledger_usd(standin), abs=1e-6)  # shown rounded

    # the outage is over: the next session (in process: no workers to start for 6 rollouts)
    # pays only the missing rollouts, and they count
    standin.fault = None
    answered = len(standin.usage)
    again = capevolve(project, "terse", "terse_iso", gate=True, extra=none)
    assert again.ret == 0, again.stdout.str()
    assert len(standin.usage) - answered == 6
    assert all(r["reward"] is not None for r in _records(project))
    assert math.isclose(sum(r["cost_usd"] for r in _records(project)), _ledger_usd(standin), rel_tol=1e-9)
    # the decision taken on 15 tasks stands (a tag is decided once): shown again, not re-judged
    again.stdout.fnmatch_lines(["terse *ACCEPT*already decided against 'seed': the first verdict stands*"])
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "terse.json").read_text())
    assert verdict["n_tasks"] == 15 and verdict["per_task"]["sum-c"]["candidate"] is None
    # the key went to the client and nowhere else: no file of the project's record holds it
    written = [p for p in (project / ".capevolve").rglob("*") if p.is_file()]
    assert written and not [p for p in written if KEY.encode() in p.read_bytes()]


def test_the_async_client_at_concurrency_8_records_what_the_sync_client_does(
    example, standin, capevolve, projects, monkeypatch
):
    """The same session through openai.OpenAI (one rollout at a time per process) and through
    openai.AsyncOpenAI with eight requests in flight: the same records."""
    monkeypatch.setenv("OPENAI_BASE_URL", standin.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    records = {}
    for name, adapter, extra in (
        ("sync", "OpenAIChatAdapter", []),
        ("async", "AsyncOpenAIChatAdapter", ["--capevolve-concurrency", "8"]),
    ):
        folder = example("openai_agent", dest=name)
        projects.edit_spec(folder, "adapter.py:OpenAIChatAdapter", f"adapter.py:{adapter}")
        result = capevolve(folder, "terse", extra=extra)
        assert result.ret == 0, result.stdout.str()
        records[name] = projects.rollout_records(folder)
    assert records["sync"] == records["async"] and len(records["sync"]) == 2 * 16 * 2
