"""A candidate whose text is a decided one's (:func:`..._project.candidate.text_hash`): the same candidate.

Only decided tags and the best are compared (undecided bytes have no decision to launder)."""

from __future__ import annotations

from pathlib import Path

from ..._project.candidate import CandidateError, content_hash, text_hash
from ..._store.files import RunDirError
from ..._store.rundir import RunDir
from .identity import Earlier, earlier_with_bytes, registered_hashes


def same_text_as(rundir: RunDir, tag: str, path: Path, *, best: str) -> Earlier | None:
    """The decided tag (or the best) whose files differ from ``path``'s in whitespace at line ends only."""
    registered = registered_hashes(rundir)
    if tag in registered:
        return None  # a resume of its own bytes
    decided = {str(e["tag"]) for e in rundir.decisions() if isinstance(e.get("decision"), str)}
    wanted = [t for t in registered if t in decided or t == best]
    if not wanted:
        return None
    mine = text_hash(path)
    for other in wanted:
        snapshot = rundir.snapshots.snapshot_dir(other)
        try:
            if content_hash(snapshot) != registered[other] or text_hash(snapshot) != mine:
                continue
        except (OSError, CandidateError, RunDirError):
            continue
        if (earlier := earlier_with_bytes(rundir, registered[other], besides=tag)) is not None:
            return earlier
    return None


def near_repeat_line(tag: str, earlier: Earlier, *, best: str) -> str:
    same = f"candidate {tag!r} differs from {earlier.tag!r} only in line endings or trailing whitespace"
    if earlier.tag == best and earlier.decision in (None, "accept"):
        return (
            f"{same}, the best of run {earlier.run_id}: an unchanged copy of the parent; change what it says"
        )
    if earlier.decision == "accept":
        return (
            f"repeat of {earlier.tag!r} ({earlier.accepted_at()}) in run {earlier.run_id}: {same}; "
            "that accept stands — nothing new decided or booked, nothing paid"
        )
    return (
        f"{same}, {earlier.said()} in run {earlier.run_id}: the same text is the same candidate, so "
        f"that decision stands at its level; change what it says (`capevolve gate {earlier.tag}` "
        "re-derives it)"
    )
