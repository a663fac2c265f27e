"""One seal per project's test tasks: which test tasks any run of the project has scored.

A run's seal (:mod:`.seal`) stops that run scoring its test split twice. A new run drawing the
same test tasks (same ``split_seed``) would score them again and call the number held out; so
scoring is also recorded for the project, and a finalize whose test split overlaps a scored
one is refused unless it is acknowledged (then every view says "test reused").

The record is read from two places, and their union counts:

- every run's event log: its ``test_scored`` events (with the test ids since this record
  exists, else that run's frozen splits) — the logs are hash-chained and checked by ``verify``;
- ``<project>/.capevolve/test_seals.jsonl``, one line appended per scoring — so a run folder
  deleted afterwards is still remembered.

Deleting the file changes nothing while the runs' logs are there; deleting a run folder changes
nothing while the file is there. Deleting both is what no file-level guard can see (the docs'
threat model: keep an anchor outside the project). Garbled lines of the file are skipped, which
can only under-count what an adversary already had to erase elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .files import RunDirError
from .rundir import RUNS_DIR, RunDir

PROJECT_SEALS = "test_seals.jsonl"
REUSED_LABEL = "test reused — not a held-out estimate"


@dataclass(frozen=True)
class ScoredTests:
    """One run's scored test tasks, and where that was read."""

    run_id: str
    test_ids: frozenset[str]
    source: str  # "events.jsonl" or "test_seals.jsonl"


def seals_path(project_dir: Path) -> Path:
    return project_dir / RUNS_DIR.parent / PROJECT_SEALS


def scored_tests(project_dir: Path) -> list[ScoredTests]:
    """Every run of the project that scored its test split, from the file and every log."""
    found: dict[str, ScoredTests] = {}
    for entry in _file_entries(project_dir):
        found[entry.run_id] = entry
    for root in sorted((project_dir / RUNS_DIR).glob("*")):
        if not (root / "events.jsonl").is_file():
            continue
        rundir = RunDir(root)
        scored = rundir.log.of_kinds("test_scored")
        if not scored:
            continue
        ids = {str(t) for e in scored for t in (e.get("test_ids") or [])}
        if not ids:  # scored before the event named its ids: that run's frozen test split
            with contextlib.suppress(RunDirError):
                ids = {str(t) for t in (rundir.splits() or {}).get("test", [])}
        earlier = found.get(rundir.run_id)
        ids |= set(earlier.test_ids) if earlier else set()
        found[rundir.run_id] = ScoredTests(rundir.run_id, frozenset(ids), "events.jsonl")
    return sorted(found.values(), key=lambda s: s.run_id)


def _file_entries(project_dir: Path) -> list[ScoredTests]:
    path = seals_path(project_dir)
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            row = json.loads(line)
            ids = frozenset(str(t) for t in row["test_ids"])
            entries.append(ScoredTests(str(row["run_id"]), ids, PROJECT_SEALS))
    return entries


def overlaps(project_dir: Path, run_id: str, test_ids: list[str]) -> list[tuple[str, list[str]]]:
    """(run, the shared tasks) for every other run of the project that scored any of
    ``test_ids``, oldest first."""
    mine = set(test_ids)
    return [
        (s.run_id, sorted(mine & s.test_ids))
        for s in scored_tests(project_dir)
        if s.run_id != run_id and mine & s.test_ids
    ]


def record_scored(project_dir: Path, run_id: str, test_ids: list[str], *, reused: bool) -> None:
    """Append this run's scoring to the project's file (one line, one ``write``)."""
    path = seals_path(project_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"run_id": run_id, "test_ids": sorted(test_ids), "reused": reused}, sort_keys=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def reused_line(run_id: str, found: list[tuple[str, list[str]]]) -> str:
    """The one line refusing to score test tasks another run of the project scored."""
    runs = "; ".join(
        f"run {other}: {len(ids)} task(s) {', '.join(ids[:6])}{' …' if len(ids) > 6 else ''}"
        for other, ids in found
    )
    return (
        f"run {run_id}: its test split overlaps test tasks the project already scored ({runs}); "
        "scoring them again would not be a held-out estimate. Ways on: new test tasks (a new run "
        "with another split_seed or split_ids_file), or acknowledge it with --capevolve-test-reused "
        f"(every table, report, dashboard and junit property then says '{REUSED_LABEL}')"
    )
