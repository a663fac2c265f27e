"""What the attack replays read back from a session: the run's event log, and the one line a
refusal is promised to be (tests/e2e/test_attacks_*.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def rollout_files(run_dir: Path, tag: str, split: str = "val") -> list[Path]:
    """``tag``'s rollout files of ``split`` in a run dir, found by the tag each holds (their names come
    from the run's secret: :meth:`pytest_capevolve._store.rundir.RunDir.rollout_path`)."""
    return [path for path, record in _records(run_dir, split) if record.get("tag") == tag]


def paid_tags(run_dir: Path, split: str = "val") -> list[str]:
    """The tag of each rollout file of ``split`` in a run dir, one a file."""
    return [str(record.get("tag")) for _, record in _records(run_dir, split)]


def paid_keys(run_dir: Path, split: str = "val") -> set[tuple[str, str]]:
    """(task id, tag) of each rollout file of ``split`` in a run dir."""
    return {(str(record.get("task_id")), str(record.get("tag"))) for _, record in _records(run_dir, split)}


def _records(run_dir: Path, split: str) -> list[tuple[Path, dict[str, Any]]]:
    """Each rollout file of ``split`` and what it holds (a file a killed session left half written is
    passed over: it holds no tag yet)."""
    found = []
    for path in sorted((run_dir / "rollouts" / split).glob("*.json")):
        try:
            found.append((path, json.loads(path.read_text())))
        except (json.JSONDecodeError, FileNotFoundError):
            continue
    return found


def events(run_dir: Path) -> list[dict[str, Any]]:
    """Every event of the run's log, in order."""
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def one_line(err: str) -> str:
    """The one non-blank line of ``err`` (the test fails, showing it all, when there are more)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]
