"""What the attack replays read back from a session: the run's event log, and the one line a
refusal is promised to be (tests/e2e/test_attacks_*.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def events(run_dir: Path) -> list[dict[str, Any]]:
    """Every event of the run's log, in order."""
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def one_line(err: str) -> str:
    """The one non-blank line of ``err`` (the test fails, showing it all, when there are more)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]
