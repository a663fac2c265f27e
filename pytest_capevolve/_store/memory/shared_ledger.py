"""A ledger shared across projects, named explicitly: ``shared_ledger: PATH`` in the spec.

Projects whose decisions and test scorings should count for each other name one JSON-lines file.
Readers take other projects' rows whose tasks meet their pool by content only (ids are each
project's labels). Writing is best effort: the project's own memory holds everything."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from .project_memory import append_line, read_rows

KEY = "shared_ledger"  # the spec key


def of_run(rundir: Any) -> Path | None:
    project = rundir.project_dir
    try:
        locked = yaml.safe_load(rundir.spec_lock_path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    stored = locked.get(KEY) if isinstance(locked, dict) else None
    if not isinstance(stored, str) or not stored:
        return None
    path = Path(stored)
    return path if path.is_absolute() or project is None else (project / path).resolve()


def record(ledger: Path | None, project_dir: Path, kind: str, row: Mapping[str, Any]) -> None:
    if ledger is None:
        return
    with contextlib.suppress(OSError):
        line = json.dumps({**row, "kind": kind, "project": str(project_dir.resolve())}, sort_keys=True)
        append_line(ledger, line)


def meeting(
    ledger: Path | None, project_dir: Path, kind: str, prefix: str, keys: Iterable[str]
) -> list[dict[str, Any]]:
    """The ledger's ``kind`` rows of other projects whose ``<prefix>_keys`` meet ``keys``, oldest first."""
    wanted = frozenset(keys)
    if ledger is None or not wanted:
        return []
    here = str(project_dir.resolve())
    found = []
    for row in read_rows(ledger):
        theirs = row.get(f"{prefix}_keys")
        if row.get("kind") != kind or row.get("project") in (here, None) or not isinstance(theirs, list):
            continue
        if wanted.intersection(map(str, theirs)):
            found.append(row)
    return found


def label(project: object, ledger: Path | str) -> str:
    return f"of the project at {project}, from the shared ledger {ledger}"
