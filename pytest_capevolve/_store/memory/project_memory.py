"""What a project remembers beyond its run folders: append-only JSON lines in its ``.capevolve/``.

A run folder can be moved or deleted, so facts that must outlive it (scored test tasks, decided
bytes) are also appended here. A garbled line is skipped: it can only under-count."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from ..rundir import RUNS_DIR


def memory_path(project_dir: Path, kind: str) -> Path:
    return project_dir / RUNS_DIR.parent / f"{kind}.jsonl"


def remember(project_dir: Path, kind: str, row: dict[str, Any]) -> None:
    """Append ``row`` in one ``write``, so concurrent appends never interleave within a line."""
    append_line(memory_path(project_dir, kind), json.dumps(row, sort_keys=True))


def recalled(project_dir: Path, kind: str) -> list[dict[str, Any]]:
    return read_rows(memory_path(project_dir, kind))


def read_rows(path: Path) -> list[dict[str, Any]]:
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
