"""The README's test command is what CI runs, and it cannot pass with a broken docs site."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    blocks = re.findall(r"```\n(python3 -m venv .*?)\n```", (ROOT / "README.md").read_text(), re.S)
    return [b.strip() for b in blocks]


def test_ci_runs_exactly_the_readmes_test_command():
    install_and_run, install_and_test = _readme_commands()[:2]
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()

    assert install_and_test in ci_lines
    assert "pytest -n 2" in install_and_test and "--capevolve-gate" in install_and_run


def test_the_docs_build_counts_its_warnings():
    # `mkdocs build --strict -q` exits 0 on broken links: -q hides the warnings --strict counts
    test_command = _readme_commands()[1]
    docs_step = next(step for step in test_command.split("&&") if "mkdocs build" in step)

    assert "--strict" in docs_step.split() and "-q" not in docs_step.split()
