"""Verdict files: ``verdicts/<tag>.json``, every number a candidate's decision rests on.

Controller only: a session's conclusion writes one and logs a ``verdict`` event with its sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ..._project.candidate import CandidateError, check_tag
from ..._project.candidate import null_control_of as verdict_is_null_control
from ..files import RunDirError, atomic_write_json, read_run_json
from ..log.event_kinds import CANDIDATE_REGISTERED, VERDICT
from ..log.events import EventLog

_LOGGED = sorted(VERDICT.allowed - {"sha256"})  # what a verdict event repeats of its file
_FIX = "re-derive it with capevolve gate TAG (pays nothing), or delete it"


class Verdicts:
    """The run's verdicts (``run.verdicts``), each logged in ``log``."""

    def __init__(self, root: Path, log: EventLog) -> None:
        self.folder = root / "verdicts"
        self.log = log

    def verdict_path(self, tag: str) -> Path:
        return self.folder / f"{check_tag(tag)}.json"

    def write_verdict(self, verdict: dict[str, Any], *, replacing: bool = False) -> Path:
        """Write ``verdicts/<tag>.json`` and log it. A decided verdict is never replaced (the first
        decision stands) but by a grow (``replacing``); nulls' are re-judged each session."""
        path = self.verdict_path(verdict["tag"])
        if not replacing and path.is_file():
            self._refuse_replacing(verdict["tag"], path)
        atomic_write_json(path, verdict)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        self.log.append_event(VERDICT, **{k: verdict.get(k) for k in _LOGGED}, sha256=digest)
        return path

    def _refuse_replacing(self, tag: str, path: Path) -> None:
        if verdict_is_null_control(tag):
            return
        registered = any(e.get("tag") == tag for e in self.log.of_kinds(CANDIDATE_REGISTERED))
        logged = [e for e in self.log.of_kinds(VERDICT) if e.get("tag") == tag]
        if registered and logged and logged[-1].get("decision") in ("accept", "reject"):
            raise RunDirError(
                f"{path}: {tag!r} was decided already ({logged[-1].get('decision')}, event seq "
                f"{logged[-1].get('seq')}); a verdict once written is never replaced — "
                f"`capevolve gate {tag}` re-derives it, new bytes need a new tag"
            )

    def checked(self, tag: str) -> dict[str, Any] | None:
        """The verdict a decision may rest on; an edited or unlogged file raises RunDirError."""
        path = self.verdict_path(tag)
        if not path.is_file():
            return None
        data = path.read_bytes()  # one read: the bytes parsed are the bytes held to the log
        found = _verdict_object(path, data)
        logged = [e for e in self.log.of_kinds(VERDICT) if e.get("tag") == tag]
        if not logged:
            raise RunDirError(f"{path}: no gate logged a verdict for {tag!r}: not the run's; delete it")
        fix = (
            "restore it from a backup (the log holds its sha256); `capevolve gate "
            f"{tag}` shows its numbers re-derived meanwhile, as a what-if"
        )
        event = logged[-1]
        if "sha256" in event:
            intact = hashlib.sha256(data).hexdigest() == event["sha256"]
        else:
            intact = all(found.get(k) == event.get(k) for k in _LOGGED)
        if not intact:
            raise RunDirError(
                f"{path}: not the verdict the gate wrote (event seq {event.get('seq')} in the log "
                f"records {event.get('decision')!r}); the file was edited. {fix}"
            )
        return found

    def checked_all(self) -> dict[str, dict[str, Any]]:
        """Every verdict file, each held to its logged event as :meth:`checked` holds one: what a
        view shows of the verdicts (numbers, reasons, confinement labels) is what the gate wrote."""
        found = {}
        for path in sorted(self.folder.glob("*.json")):
            try:
                found[path.stem] = self.checked(check_tag(path.stem)) or {}
            except CandidateError:
                raise RunDirError(f"{path}: no tag's verdict (no gate writes that name); delete it") from None
        return found

    def verdict(self, tag: str) -> dict[str, Any] | None:
        path = self.verdict_path(tag)
        return _verdict_object(path) if path.is_file() else None

    def verdicts(self) -> dict[str, dict[str, Any]]:
        return {path.stem: _verdict_object(path) for path in sorted(self.folder.glob("*.json"))}


def _verdict_object(path: Path, data: bytes | None = None) -> dict[str, Any]:
    found = read_run_json(path, _FIX, data)
    if not isinstance(found, dict):
        raise RunDirError(f"{path}: damaged, not a JSON object ({type(found).__name__}); {_FIX}")
    return found
