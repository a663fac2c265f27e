"""Verdict files: ``verdicts/<tag>.json``, every number a candidate's decision rests on.

The part ``run.verdicts`` of :class:`.rundir.RunDir`. Controller only: a session's conclusion
writes one (atomically) and logs a ``verdict`` event with its headline fields; the tables, the
pages and ``capevolve`` commands read them back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._project.candidate import check_tag
from .events import EventLog
from .files import atomic_write_json, read_run_json

_LOGGED = ("tag", "against", "decision", "basis", "p_value", "delta_mean")
_FIX = "re-derive it with capevolve gate TAG (pays nothing), or delete it"


class Verdicts:
    """The run's verdicts, under ``root / "verdicts"``, each logged in ``log``."""

    def __init__(self, root: Path, log: EventLog) -> None:
        self.folder = root / "verdicts"
        self.log = log

    def verdict_path(self, tag: str) -> Path:
        return self.folder / f"{check_tag(tag)}.json"

    def write_verdict(self, verdict: dict[str, Any]) -> Path:
        """Write ``verdicts/<tag>.json`` (every number the decision rests on) and log it."""
        path = self.verdict_path(verdict["tag"])
        atomic_write_json(path, verdict)
        self.log.append_event("verdict", **{k: verdict.get(k) for k in _LOGGED})
        return path

    def verdict(self, tag: str) -> dict[str, Any] | None:
        path = self.verdict_path(tag)
        return dict(read_run_json(path, _FIX)) if path.is_file() else None

    def verdicts(self) -> dict[str, dict[str, Any]]:
        """Every verdict file of the run, by tag."""
        return {path.stem: dict(read_run_json(path, _FIX)) for path in sorted(self.folder.glob("*.json"))}
