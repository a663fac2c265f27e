"""What a project remembers beyond its run folders: append-only JSON lines in its ``.capevolve/``.

A run's own log is the record of that run, but a run folder can be moved out of the project or
deleted, and then everything it decided or scored is forgotten by the next run. Facts that
must outlive a run folder — which test tasks were scored (:mod:`.project_seal`), which bytes
were decided (:mod:`.._policy.decision_memory`) — are also appended, one line per fact, to
``<project>/.capevolve/<kind>.jsonl``, beside the runs, read by every later run.

Memory lives in the project and nowhere else: a copy of the project in another folder, or a
second clone, starts without it and is a new project (a team that wants decisions shared
across projects names a ledger, :mod:`.shared_ledger`). A garbled line is skipped, which can
only under-count; deleting ``.capevolve`` whole forgets the project's past, which no file-level
guard can see (the threat model's answer is the anchor kept where the optimizer cannot write).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from .rundir import RUNS_DIR


def memory_path(project_dir: Path, kind: str) -> Path:
    return project_dir / RUNS_DIR.parent / f"{kind}.jsonl"


def remember(project_dir: Path, kind: str, row: dict[str, Any]) -> None:
    """Append ``row`` to the project's ``<kind>.jsonl`` (one ``write``: two sessions appending
    at once never interleave within a line)."""
    append_line(memory_path(project_dir, kind), json.dumps(row, sort_keys=True))


def recalled(project_dir: Path, kind: str) -> list[dict[str, Any]]:
    """Every readable row of the project's ``<kind>.jsonl``, oldest first."""
    return read_rows(memory_path(project_dir, kind))


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, garbled lines skipped ([] when there is no file)."""
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
