"""What a project remembers beyond its run folders: append-only JSON lines kept twice.

A run's own log is the record of that run, but a run folder can be moved out of the project or
deleted, and then everything it decided or scored is forgotten by the next run. Facts that
must outlive a run folder — which test tasks were scored (:mod:`.project_seal`), which bytes
were decided (:mod:`.._policy.decision_memory`) — are also appended, one line per fact, to

- ``<project>/.capevolve/<kind>.jsonl`` (beside the runs, read by every later run), and
- ``$CAPEVOLVE_STATE_DIR/<kind>/<project digest>.jsonl`` (default ``~/.local/state/capevolve``),
  keyed by the project's absolute path: out of the project, the run dir and the candidate, so
  ``rm -rf .capevolve`` forgets nothing.

Readers take the union of the two. A garbled line is skipped, which can only under-count what an
adversary already had to erase elsewhere; the same OS user can still delete both (the threat
model's answer to that is the anchor kept where the optimizer cannot write).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .rundir import RUNS_DIR

STATE_DIR_ENV = "CAPEVOLVE_STATE_DIR"  # where the copy outside the project lives


def inside_path(project_dir: Path, kind: str) -> Path:
    return project_dir / RUNS_DIR.parent / f"{kind}.jsonl"


def outside_path(project_dir: Path, kind: str) -> Path:
    root = os.environ.get(STATE_DIR_ENV) or str(Path.home() / ".local" / "state" / "capevolve")
    key = hashlib.sha256(str(project_dir.resolve()).encode("utf-8")).hexdigest()[:24]
    return Path(root) / kind / f"{key}.jsonl"


def remember(project_dir: Path, kind: str, row: dict[str, Any]) -> None:
    """Append ``row`` to both copies (one ``write`` each). The copy outside is best effort: an
    unwritable home is no reason to lose what the project's file and the log already hold."""
    append_line(inside_path(project_dir, kind), json.dumps(row, sort_keys=True))
    with contextlib.suppress(OSError):
        outside = {**row, "project": str(project_dir.resolve())}
        append_line(outside_path(project_dir, kind), json.dumps(outside, sort_keys=True))


def recalled(project_dir: Path, kind: str) -> list[tuple[dict[str, Any], str]]:
    """Every row of both copies, with where it was read (``<kind>.jsonl`` or "outside the
    project"); the outside copy's rows for this project only (its lines name the project)."""
    mine = str(project_dir.resolve())
    found = [(row, f"{kind}.jsonl") for row in _rows(inside_path(project_dir, kind))]
    found += [(row, OUTSIDE) for row in _rows(outside_path(project_dir, kind)) if row.get("project") == mine]
    return found


OUTSIDE = "outside the project"


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    # "\n" only: str.splitlines would split a row inside a value holding U+2028 (dropping it)
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            if isinstance(row, dict):
                rows.append(row)
    return rows


def append_line(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
