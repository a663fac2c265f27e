"""The threat model's tables name the test that replays each attack: every one named exists,
so the page cannot promise a defence whose test was renamed or deleted."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "explanation" / "threat-model.md"


def test_every_test_the_threat_model_names_exists() -> None:
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", PAGE.read_text(encoding="utf-8"))
    assert len(named) >= 50
    missing = [
        f"{file}::{name}"
        for file, name in named
        if not (REPO / file).is_file()
        or not re.search(rf"^(async )?def {name}\(", (REPO / file).read_text(encoding="utf-8"), re.M)
    ]
    assert missing == []


def test_every_attack_row_names_a_test() -> None:
    rows = [
        line
        for line in PAGE.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and not line.startswith(("| attack", "| event", "| adversary"))
    ]
    attack_rows = [row for row in rows if row.count("|") == 4 and "---" not in row]
    assert attack_rows and all("`tests/" in row for row in attack_rows if not row.startswith("| **"))
