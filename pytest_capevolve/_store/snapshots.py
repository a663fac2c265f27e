"""Candidate snapshots: ``candidates/<tag>/files`` holds the bytes a tag was evaluated with.

A tag names one capability forever: registering different bytes under a known tag is refused.
Snapshots are written to a staging folder and renamed into place, so a crash never leaves a
half-copied candidate.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from .._project.candidate import (
    CandidateError,
    check_tag,
    content_hash,
    iter_files,
    null_control_of,
)
from .._project.paths import from_stored, rebase, to_stored
from .events import EventLog
from .files import RunDirError, atomic_write_json, read_run_json


class Snapshots:
    """The run's candidates (the part ``run.snapshots`` of :class:`.rundir.RunDir`): registered
    in ``log``; ``project_dir`` is where their sources are stored relative to (None: the run
    dir sits outside a project's ``.capevolve/runs/``)."""

    def __init__(self, root: Path, run_id: str, log: EventLog, project_dir: Path | None) -> None:
        self.root = root
        self.run_id = run_id
        self.log = log
        self.events_path = log.events_path
        self.project_dir = project_dir

    def candidate_dir(self, tag: str) -> Path:
        return self.root / "candidates" / check_tag(tag)

    def snapshot_dir(self, tag: str) -> Path:
        """The immutable copy of the candidate's bytes, taken when it was first registered."""
        return self.candidate_dir(tag) / "files"

    def snapshot_size(self, tag: str) -> int:
        """Bytes of the tag's snapshot (what ``simplicity_tiebreak`` compares)."""
        return sum(p.stat().st_size for p in self.snapshot_dir(tag).rglob("*") if p.is_file())

    def candidate_hash(self, tag: str) -> str | None:
        meta = self.candidate_dir(tag) / "candidate.json"
        return str(self._metadata(tag)["content_hash"]) if meta.is_file() else None

    def _metadata(self, tag: str) -> dict[str, Any]:
        """``candidates/<tag>/candidate.json``; damaged (garbled, cut short, a field missing):
        a RunDirError naming it, never a traceback."""
        meta = self.candidate_dir(tag) / "candidate.json"
        fix = "restore it, or start a new run with --capevolve-new-run"
        found = read_run_json(meta, fix)
        if not isinstance(found, dict) or not {"content_hash", "source"} <= found.keys():
            raise RunDirError(f"{meta}: damaged, lacks content_hash or source; {fix}")
        return found

    def register_candidate(self, tag: str, source: Path) -> str:
        """Snapshot ``source`` under ``tag`` (first time) and return its content hash.

        Refuses different bytes under an existing tag: a tag names one capability forever.
        """
        digest = content_hash(source)
        self._refuse_reserved(tag, digest)
        known = self.candidate_hash(tag)
        if known is not None:
            if known != digest:
                raise CandidateError(
                    f"tag {tag!r} was evaluated in run {self.run_id} with different bytes "
                    f"({known}); {source} now hashes to {digest}. Give the new version its own "
                    "tag with --capevolve-tag, or use --capevolve-rerun"
                )
            return digest
        dest = self.candidate_dir(tag)
        staging = dest.with_name(f".{tag}.staging-{secrets.token_hex(4)}")
        files_dir = staging / "files"
        files_dir.mkdir(parents=True)
        for path in iter_files(source):
            target = files_dir / path.relative_to(source.resolve())
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        project = self.project_dir
        stored = to_stored(source, project) if project is not None else str(source.resolve())
        atomic_write_json(staging / "candidate.json", {"tag": tag, "source": stored, "content_hash": digest})
        try:
            os.rename(staging, dest)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            return self.register_candidate(tag, source)
        self.log.append_event("candidate_registered", tag=tag, content_hash=digest)
        return digest

    def _refuse_reserved(self, tag: str, digest: str) -> None:
        """A tag named as a null control (``<tag>-null<i>``) holds that tag's bytes or is
        refused; so is a tag that differs from a known one only in case (one folder on a
        case-insensitive file system)."""
        copied = null_control_of(tag)
        if copied is not None and (copied not in self.known_tags() or self.candidate_hash(copied) != digest):
            raise CandidateError(
                f"tag {tag!r} is reserved: '<tag>-null<i>' names a null control (a byte-identical copy "
                f"of {copied!r}); give this candidate another --capevolve-tag (or rename its folder)"
            )
        twin = [t for t in self.known_tags() if t != tag and t.lower() == tag.lower()]
        if twin:
            raise CandidateError(
                f"tag {tag!r} differs from the run's tag {twin[0]!r} only in case (one folder on a "
                "case-insensitive file system); give this candidate another --capevolve-tag"
            )

    def candidate_source(self, tag: str) -> Path:
        """The folder ``tag`` was registered from, in the project's current folder.

        ``candidate.json`` stores it relative to the project (absolute when outside it). Runs
        created before that store it absolutely; a path inside the project's folder of then
        (their ``run_created`` event names it) is mapped to where the project is now."""
        stored = str(self._metadata(tag)["source"])
        project = self.project_dir
        if project is None:
            return Path(stored)
        if Path(stored).is_absolute():
            stored = rebase(stored, self._created_in())
        return from_stored(stored, project)

    def _created_in(self) -> Path | None:
        """The project's folder when a run that stores absolute paths was created, from its
        ``run_created`` event (the first line); None for runs that store them relative."""
        if not self.events_path.is_file():
            return None
        with open(self.events_path, encoding="utf-8") as handle:
            for line in handle:
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if event.get("kind") == "run_created" and isinstance(event.get("spec"), str):
                        spec = Path(event["spec"])
                        return spec.parent if spec.is_absolute() else None
        return None

    def known_tags(self) -> list[str]:
        base = self.root / "candidates"
        return sorted(p.name for p in base.glob("*") if (p / "candidate.json").is_file())
