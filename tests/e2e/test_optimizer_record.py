"""Issue 24: the optimizer's command line, API key included, was stored in
``hill_climb/<cid>/optimizer.json``. The record keeps the command with each secret redacted;
the optimizer itself still gets the real one."""

from __future__ import annotations

import sys

from pytest_capevolve._cli.main import main

KEY = "sk-test-0123456789abcdefXYZ"
TOKEN = "tok-9f8e7d6c5b4a3210"


def test_no_secret_of_the_optimizer_command_reaches_the_run_dir(example, capsys, monkeypatch):
    project = example("toy_calc")
    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)
    optimizer = (
        f"env OPENAI_API_KEY={KEY} PASSED={TOKEN} {sys.executable} optimizer.py {{workdir}} {{prompt}}"
    )
    code = main(["hill-climb", str(project), "--optimizer", optimizer, "--max-iterations", "1", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    runs = project / ".capevolve"
    records = [p for p in runs.rglob("optimizer.json")]
    assert records, "the iteration wrote its optimizer.json"
    assert "[redacted]" in records[0].read_text()
    leaked = [
        p
        for p in runs.rglob("*")
        if p.is_file() and (KEY.encode() in p.read_bytes() or TOKEN.encode() in p.read_bytes())
    ]
    assert leaked == []
    # the optimizer ran with the real command: its proposal was accepted
    assert '"accepted": ["cand_0001"]' in out.out
