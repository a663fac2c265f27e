"""Candidate snapshots: ``snapshots/<name>`` holds the bytes a tag was evaluated with, and
``candidates/<tag>/candidate.json`` what they were registered as.

A tag names one capability forever: different bytes under a known tag are refused. Snapshots are
staged, renamed into place and made read-only; every session evaluates the snapshot, never its source.
The folder a rollout runs from (its code's ``__file__``, ``ctx``, cwd) is named from the run's secret,
never from the tag (:func:`folder_name`): the best's code cannot tell its null controls' runs from its
own, and no optimizer can choose a name, or compute one before the run's secret exists, that a
simulator keyed on the folder turns into lucky draws."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .._project.candidate import (
    SEED_TAG,
    CandidateError,
    check_tag,
    content_hash,
    file_digests,
    iter_files,
    null_control_of,
)
from .._project.spec import to_stored
from .._project.way_on import candidate_folder, pasteable
from .files import RunDirError, atomic_write_json, read_run_json
from .log.event_kinds import CANDIDATE_REGISTERED
from .log.events import EventLog

SNAPSHOTS_DIR = "snapshots"


class OlderRunError(RunDirError):
    """A run an older version made, which every session refuses (``capevolve check`` says so too)."""


def folder_name(secret: bytes, tag: str) -> str:
    """The name of the folder ``tag`` is evaluated from: a MAC of the tag under the run's secret
    (a key of its own, derived from the secret the sequential gate's orders use), 64 bits."""
    key = hmac.new(secret, b"capevolve-snapshot-folder", hashlib.sha256).digest()
    return hmac.new(key, tag.encode(), hashlib.sha256).hexdigest()[:16]


class Snapshots:
    """The run's candidates (``run.snapshots``); ``secret`` reads the run's secret (controller only:
    workers get each folder in the plan)."""

    def __init__(
        self, root: Path, run_id: str, log: EventLog, project_dir: Path | None, secret: Callable[[], bytes]
    ) -> None:
        self.root = root
        self.run_id = run_id
        self.log = log
        self.project_dir = project_dir
        self._secret = secret
        self._names: dict[str, str] = {}

    def candidate_dir(self, tag: str) -> Path:
        """What people read about ``tag`` (``candidate.json``), named by the tag: nothing runs here."""
        return self.root / "candidates" / check_tag(tag)

    def snapshot_dir(self, tag: str) -> Path:
        """The folder ``tag``'s rollouts and microcases run from, named by :func:`folder_name`. A run an
        older version made ran them from ``candidates/<tag>/files``: refused, with the way on."""
        name = self._names.get(tag)
        if name is None:
            self.refuse_older_layout(tag)
            name = self._names[tag] = folder_name(self._secret(), check_tag(tag))
        return self.root / SNAPSHOTS_DIR / name

    def refuse_older_layout(self, tag: str) -> None:
        """Refused where ``tag`` ran from ``candidates/<tag>/files`` (an older version's run): the way on
        pasteable as printed, in a session the command typed, in a new run."""
        if (self.candidate_dir(tag) / "files").is_dir():
            raise OlderRunError(
                f"run {self.run_id} was made by an older pytest-capevolve, which ran each candidate from "
                f"a folder named by its tag ({self.candidate_dir(tag) / 'files'}), so candidate code could "
                "read which tag it ran as; start a new run "
                + pasteable(
                    "(`pytest --capevolve-run PROJECT --capevolve-new-run`, or `capevolve hill-climb PROJECT "
                    "--new-run`)",
                    self.project_dir,
                )
            )

    def snapshot_size(self, tag: str) -> int:
        return sum(p.stat().st_size for p in self.snapshot_dir(tag).rglob("*") if p.is_file())

    def candidate_hash(self, tag: str) -> str | None:
        meta = self.candidate_dir(tag) / "candidate.json"
        if not meta.is_file():
            return None
        fix = "restore it, or start a new run with --capevolve-new-run"
        found = read_run_json(meta, fix)
        if not isinstance(found, dict) or not {"content_hash", "source"} <= found.keys():
            raise RunDirError(f"{meta}: damaged, lacks content_hash or source; {fix}")
        return str(found["content_hash"])

    def register_candidate(self, tag: str, source: Path, expected: str | None = None) -> str:
        """Snapshot ``source`` under ``tag`` (first time) and return its content hash; refused before any
        copy when it is not ``expected`` (the bytes a check compared a moment ago)."""
        digest = content_hash(source)
        if expected is not None and digest != expected:
            raise CandidateError(
                f"{source} no longer holds the bytes checked ({expected}): not registered; register it again "
                "once nothing writes to it"
            )
        self._refuse_reserved(tag, digest)
        if self.refuse_other_bytes(tag, source, digest):
            return digest
        dest, snapshot = self.candidate_dir(tag), self.snapshot_dir(tag)
        staging = dest.with_name(f".{tag}.staging-{secrets.token_hex(4)}")
        files_dir = snapshot.with_name(f".{snapshot.name}.staging-{secrets.token_hex(4)}")
        files_dir.mkdir(parents=True)
        staging.mkdir(parents=True)
        for path in iter_files(source):
            target = files_dir / path.relative_to(source.resolve())
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        if content_hash(files_dir) != digest:  # the source changed while it was copied
            for folder in (staging, files_dir):
                shutil.rmtree(folder, ignore_errors=True)
            raise CandidateError(
                f"{source} changed while it was being registered as {tag!r}; register it again "
                "once nothing writes to it"
            )
        files = file_digests(files_dir)
        make_read_only(files_dir)
        project = self.project_dir
        stored = to_stored(source, project) if project is not None else str(source.resolve())
        atomic_write_json(
            staging / "candidate.json", {"tag": tag, "source": stored, "content_hash": digest, "files": files}
        )
        _move_into_place(files_dir, snapshot, digest, lambda: self.candidate_hash(tag) is not None)
        try:
            os.rename(staging, dest)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            return self.register_candidate(tag, source, expected)
        self.log.append_event(CANDIDATE_REGISTERED, tag=tag, content_hash=digest)
        return digest

    def refuse_other_bytes(self, tag: str, source: Path, digest: str) -> bool:
        """Whether ``tag`` is registered (with ``digest``); CandidateError when it holds other bytes
        (``capevolve check`` says it before the next session refuses)."""
        known = self.candidate_hash(tag)
        if known is None:
            return False
        if known != digest and tag == SEED_TAG:
            # a tag or a rerun gives a candidate new bytes; the seed has no flag for that
            raise CandidateError(
                f"the seed was evaluated in run {self.run_id} with different bytes ({known}); "
                f"{source} now hashes to {digest}. A run keeps its seed: restore it, or measure "
                "the new seed in a new run (--capevolve-new-run)"
            )
        if known != digest:
            raise CandidateError(
                f"tag {tag!r} was evaluated in run {self.run_id} with different bytes "
                f"({known}); {source} now hashes to {digest}. Give the new version its own "
                "tag with --capevolve-tag, or use --capevolve-rerun"
            )
        return True

    def _refuse_reserved(self, tag: str, digest: str) -> None:
        """Refuse a null-control tag not holding its tag's bytes, and a tag differing only in case."""
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

    def known_tags(self) -> list[str]:
        base = self.root / "candidates"
        return sorted(p.name for p in base.glob("*") if (p / "candidate.json").is_file())


def _move_into_place(staged: Path, snapshot: Path, digest: str, registered: Callable[[], bool]) -> None:
    """``staged`` renamed to ``snapshot``. One there already is kept when the tag is ``registered``
    (another session registered it first: its ``candidate.json`` names the bytes it holds) or holds
    ``digest``; else it is what a registration stopped before its ``candidate.json`` left: replaced."""
    snapshot.parent.mkdir(exist_ok=True)
    try:
        os.rename(staged, snapshot)
        return
    except OSError:
        if not registered() and _hash_or_none(snapshot) != digest:
            shutil.rmtree(snapshot, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.rename(staged, snapshot)
    shutil.rmtree(staged, ignore_errors=True)


def _hash_or_none(folder: Path) -> str | None:
    try:
        return content_hash(folder)
    except (OSError, CandidateError):
        return None


def registered_files(snapshot: Path, tag: str) -> dict[str, str] | None:
    """Each file's sha256 as ``tag`` registered it, beside the run's ``snapshot`` folder (None: old
    runs): to name what changed, never to decide that it did."""
    meta = snapshot.parent.parent / "candidates" / tag / "candidate.json"
    try:
        found = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = found.get("files") if isinstance(found, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return None
    return {str(k): v for k, v in files.items()}


_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def make_read_only(folder: Path) -> None:
    """Take the write bits off every file under ``folder`` (folders stay writable: deletable)."""
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(stat.S_IMODE(path.stat().st_mode) & ~_WRITE_BITS)


def writable_copy(source: Path, dest: Path, ignore: Any = None, symlinks: bool = False) -> None:
    """A copy of a snapshot whose files the optimizer can edit (``symlinks``: kept as links)."""
    shutil.copytree(source, dest, ignore=ignore, symlinks=symlinks)
    for path in dest.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(stat.S_IMODE(path.stat().st_mode) | stat.S_IWUSR)


def unknown_tag(tag: str, run_id: str, known: Iterable[str], project: Path | None) -> str:
    """The refusal of a tag no session registered, its way on the gate of the tag's folder: the project's
    ``candidates/TAG`` when there is one (a folder's name is its tag), else CANDIDATE_FOLDER."""
    named = candidate_folder(tag, project, "CANDIDATE_FOLDER")
    return pasteable(
        f"unknown tag {tag!r} in run {run_id} (known: {', '.join(sorted(known)) or 'none'}); a candidate "
        "is known to a run once a gate session has evaluated it: pytest --capevolve-run PROJECT "
        f"--capevolve-candidate {named} --capevolve-gate (which books the decision itself; "
        "--capevolve-commit none leaves it to capevolve commit)",
        project,
    )
