"""What a booked decision changed, as the folders to compare and, for a reject, the change itself.

:func:`.commit.book` logs ``changed_files`` and, for a reject, a bounded unified ``diff``, so
``rejected.jsonl`` tells the next proposer what edit was refuted. Writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._project.candidate import CandidateError
from .._project.candidate_diff import bounded, unified_diff
from .._store.rundir import RunDir


def compared(
    rundir: RunDir, tag: str, parent: str, verdict: dict[str, Any] | None
) -> tuple[Path, Path] | None:
    """``tag``'s folder and its parent's from snapshots (else the recorded source folder, else the work
    copy); None when either is gone."""
    mine, theirs = rundir.snapshots.snapshot_dir(tag), rundir.snapshots.snapshot_dir(parent)
    if not mine.is_dir():
        source = (verdict or {}).get("details", {}).get("source")
        mine = Path(source) if source else rundir.work_dir(tag)
    if not mine.is_dir() or not theirs.is_dir():
        return None
    return mine, theirs


def refuted_diff(rundir: RunDir, tag: str, parent: str, verdict: dict[str, Any] | None) -> str:
    """The unified diff ``tag`` made against ``parent``, cut to :data:`.candidate_diff.DIFF_LIMIT`; "" if
    none."""
    folders = compared(rundir, tag, parent, verdict)
    if folders is None:
        return ""
    mine, theirs = folders
    try:
        return bounded(unified_diff(theirs, mine, parent, tag))
    except (CandidateError, OSError) as exc:  # a symlink leaving the folder: the tamper guard's
        return f"(no diff: {exc})\n"
