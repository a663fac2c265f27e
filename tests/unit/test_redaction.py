"""What of the optimizer's command line is written to ``optimizer.json``: no secret."""

from __future__ import annotations

from pytest_capevolve._loop.optimizer import REDACTED, redacted


def test_secrets_in_an_argv_are_redacted_and_the_rest_kept() -> None:
    argv = [
        "env",
        "OPENAI_API_KEY=sk-proj-abcdefgh12345678",
        "python",
        "opt.py",
        "--api-key",
        "plainvalue",
        "--token=abc",
        "--model",
        "gpt-x",
        "--header=Authorization: Bearer sk-abcdefghijklmnop",
        "/work/run/x/prompt.md",
        "uses=hunter2hunter2",
    ]
    out = redacted(argv, {"MY_SERVICE_SECRET": "hunter2hunter2", "HOME": "/root", "SHORT_KEY": "abc"})
    assert out == [
        "env",
        f"OPENAI_API_KEY={REDACTED}",
        "python",
        "opt.py",
        "--api-key",
        REDACTED,
        f"--token={REDACTED}",
        "--model",
        "gpt-x",
        f"--header=Authorization: Bearer {REDACTED}",
        "/work/run/x/prompt.md",
        f"uses={REDACTED}",  # a secret environment variable's value, wherever it appears
    ]


def test_an_argv_without_secrets_is_unchanged() -> None:
    argv = ["python", "optimizer.py", "/tmp/work/cand_0001", "/tmp/work/prompt.md", "--focus", "errors"]
    assert redacted(argv, {"HOME": "/root", "PATH": "/usr/bin"}) == argv
