"""A ledger shared across projects, named explicitly: ``shared_ledger: PATH`` in the spec.

Memory lives in the project (:mod:`.project_memory`): a copy of it in another folder, a second
clone, or an unrelated project with the same task ids decides afresh. A team that wants the
decisions and test scorings of several projects (clones of one repository on several machines,
variants of one project) to count for each other names one JSON-lines file in each project's
spec, relative to the spec's folder or absolute. The key is frozen with the run (a change is a
new run), and a run reads and writes the ledger its ``spec.lock.yaml`` names.

Every row the project's memory keeps is appended to the ledger too, with its ``kind`` and the
``project`` (absolute folder) that wrote it. A reader takes the rows of *other* projects whose
tasks meet this pool's **by content** (:mod:`.task_keys`): another project's ids are its own
labels, so an unrelated project with ids ``t00…t29`` and other tasks is never held by them. Its
own project's rows are its memory's business. What a row contributes is labelled wherever it
shows: ``run R of the project at P, from the shared ledger L`` (:func:`label`).

Writing is best effort: a ledger that cannot be written (a share not mounted) never loses what
the run's log and the project's memory already hold. Controller side or the CLI.
"""

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
    """The ledger the run's spec lock names (None: none named, or no readable lock)."""
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
    """Append ``row`` (a row of the project's ``kind`` memory) to ``ledger``, when one is named."""
    if ledger is None:
        return
    with contextlib.suppress(OSError):
        line = json.dumps({**row, "kind": kind, "project": str(project_dir.resolve())}, sort_keys=True)
        append_line(ledger, line)


def meeting(
    ledger: Path | None, project_dir: Path, kind: str, prefix: str, keys: Iterable[str]
) -> list[dict[str, Any]]:
    """The ledger's ``kind`` rows of other projects whose ``<prefix>_keys`` meet ``keys`` (this
    pool's content keys), oldest first."""
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
    """How every view names a row the ledger contributed."""
    return f"of the project at {project}, from the shared ledger {ledger}"
