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

One rule closes the way round that leaves no file to contradict it:

- **a run whose test status is unknown counts**: a folder under ``runs/`` that holds a run's
  files (splits, snapshots, verdicts, rollouts, the seal, the secret, the spec lock — anything
  but lock files) but no readable ``events.jsonl`` (renamed, deleted, garbled), or whose files
  show a test scoring (``seal.json``, ``rollouts/test/``) its log does not record, may have
  scored the test split: a finalize overlapping its test tasks (its ``splits.json``'s, else all
  of them) is refused unless acknowledged, naming the run and why its status is unknown. A
  user who deletes an old run deletes it whole; only a half-erased run trips this.

Tasks are matched by id **or by content** (:mod:`.task_keys`): renamed ids are the same tasks.
A copy of the project in another folder, or a second clone, is another project with seals of
its own; projects that name one shared ledger (:mod:`.shared_ledger`) also hold each other's
scorings, matched by content only and labelled with the project and the ledger. A run whose
val or train holds scored test tasks is refused too (:func:`sealed_in_dev`).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import project_memory, shared_ledger, task_keys
from .files import RunDirError
from .rundir import RUNS_DIR, RunDir

SEALS_KIND = "test_seals"
PROJECT_SEALS = f"{SEALS_KIND}.jsonl"
REUSED_LABEL = "test reused — not a held-out estimate"


@dataclass(frozen=True)
class ScoredTests:
    """One run's scored test tasks, and where that was read."""

    run_id: str
    test_ids: frozenset[str]
    source: str  # "events.jsonl", "test_seals.jsonl", "unknown", or the shared ledger's path
    unknown: str | None = None  # why this run's test status is unknown (then it may be any task)
    test_keys: frozenset[str] = frozenset()  # the scored tasks' content keys (:mod:`.task_keys`)
    project: str | None = None  # another project's run, from the shared ledger (``source``)

    def named(self) -> str:
        """The run as a refusal names it: its id, why its status is unknown when it is, and
        the project and ledger it came from when another project's."""
        if self.unknown:
            return f"{self.run_id} (test status unknown: {self.unknown})"
        if self.project:
            return f"{self.run_id} ({shared_ledger.label(self.project, self.source)})"
        return self.run_id

    @property
    def tasks(self) -> task_keys.Tasks:
        return task_keys.Tasks(self.test_ids, self.test_keys)


def scored_tests(project_dir: Path, pool_keys: Any = (), ledger: Path | None = None) -> list[ScoredTests]:
    """Every run of the project that scored its test split — from the project's file and
    every log — and every run whose test status is unknown; and, from the shared ``ledger``
    when one is named, the runs of other projects whose scored tasks share content with
    ``pool_keys`` (this pool's content keys)."""
    found: dict[tuple[str | None, str], ScoredTests] = {}
    entries = _remembered(project_dir, pool_keys, ledger)
    entries += [run for root in sorted((project_dir / RUNS_DIR).glob("*")) if (run := _run_entry(root))]
    for entry in entries:
        earlier = found.get((entry.project, entry.run_id))
        ids = entry.test_ids | (earlier.test_ids if earlier else frozenset())
        keys = entry.test_keys | (earlier.test_keys if earlier else frozenset())
        found[entry.project, entry.run_id] = ScoredTests(
            entry.run_id, ids, entry.source, entry.unknown, keys, entry.project
        )
    return sorted(found.values(), key=lambda s: s.run_id)


def _run_entry(root: Path) -> ScoredTests | None:
    """What one run folder says of its test split: scored (its log's ``test_scored``), unknown
    (its files hold a run but its log is not readable, or they show a scoring it does not
    record), or nothing (never scored; an empty folder)."""
    if not root.is_dir():
        return None
    rundir = RunDir(root)
    why = None
    scored: list[dict[str, Any]] = []
    if not rundir.events_path.is_file():
        if not _holds_a_run(root):
            return None
        why = "its folder holds a run's files but no events.jsonl"
    else:
        try:
            scored = rundir.log.of_kinds("test_scored")
        except (RunDirError, OSError, ValueError):
            why = "its events.jsonl cannot be read as a log"
    if why is None and not scored:
        if not (root / "seal.json").is_file() and not any((root / "rollouts" / "test").glob("*")):
            return None
        why = "its files show a test scoring its events.jsonl does not record"
    ids: set[str] = {str(t) for e in scored for t in (e.get("test_ids") or [])}
    if not ids:  # scored before the event named its ids, or unknown: that run's frozen test split
        with contextlib.suppress(RunDirError, OSError, ValueError, TypeError, AttributeError):
            ids = {str(t) for t in (json.loads(rundir.splits_path.read_text()) or {}).get("test", [])}
    keys = task_keys.recorded(rundir)
    test_keys = frozenset(keys[t] for t in ids if t in keys)
    return ScoredTests(rundir.run_id, frozenset(ids), "unknown" if why else "events.jsonl", why, test_keys)


def _holds_a_run(root: Path) -> bool:
    """Whether a folder with no log holds anything a run writes (lock files aside)."""
    return any(not p.name.endswith(".lock") for p in root.iterdir())


def _remembered(project_dir: Path, pool_keys: Any = (), ledger: Path | None = None) -> list[ScoredTests]:
    """The project's file, and the shared ledger's rows of other projects meeting ``pool_keys``
    (their ids left out: another project's labels)."""
    entries = []
    rows = [(row, False) for row in project_memory.recalled(project_dir, SEALS_KIND)]
    rows += [(row, True) for row in shared_ledger.meeting(ledger, project_dir, SEALS_KIND, "test", pool_keys)]
    for row, foreign in rows:
        with contextlib.suppress(ValueError, TypeError, KeyError):
            tasks = task_keys.Tasks.from_row(row, "test", foreign=foreign)
            source, project = (str(ledger), str(row["project"])) if foreign else (PROJECT_SEALS, None)
            entries.append(ScoredTests(str(row["run_id"]), tasks.ids, source, None, tasks.keys, project))
    return entries


def overlaps(
    project_dir: Path,
    run_id: str,
    test_ids: list[str],
    keys: dict[str, str] | None = None,
    ledger: Path | None = None,
) -> list[tuple[str, list[str]]]:
    """(run, the shared tasks) for every other run of the project (or, from the shared
    ``ledger``, of another project) that scored any of ``test_ids`` — by id, or by content
    (``keys``: this run's id → content key) — oldest first."""
    mine = task_keys.Tasks.of(test_ids, keys)
    found = []
    for scored in scored_tests(project_dir, (keys or {}).values(), ledger):
        if scored.run_id == run_id and scored.project is None:
            continue
        # a run whose status is unknown and whose test split is unknown too may have scored any
        unknown_split = scored.unknown and not scored.test_ids
        shared = sorted(mine.ids) if unknown_split else mine.shared(scored.tasks, keys)
        if shared:
            found.append((scored.named(), shared))
    return found


def sealed_in_dev(
    project_dir: Path,
    run_id: str,
    splits: Any,
    keys: dict[str, str] | None = None,
    ledger: Path | None = None,
) -> list[tuple[str, list[str]]]:
    """(run, the tasks) for every other run whose scored test tasks this run's val or train
    holds, by id or content. Only tasks known to be scored count here (a run whose test split
    is unknown cannot name any: it is held against a later finalize, not against every val)."""
    scored_runs = scored_tests(project_dir, (keys or {}).values(), ledger)
    others = [scored for scored in scored_runs if scored.run_id != run_id or scored.project]
    if not others:  # most projects: no other run scored its test split
        return []
    mine = task_keys.Tasks.of([str(t) for name in ("val", "train") for t in splits.get(name, [])], keys)
    found = []
    for scored in others:
        shared = mine.shared(scored.tasks, keys)
        if shared:
            found.append((scored.named(), shared))
    return found


def sealed_dev_line(run_id: str, found: list[tuple[str, list[str]]]) -> str:
    """The one line refusing a run whose val or train holds the project's scored test tasks."""
    return (
        f"run {run_id}: its val/train splits hold test tasks the project already scored ({_runs(found)}); "
        "the test split is sealed for the project, so gating or training on them would select on "
        "held-out tasks. Ways on: new splits that leave them out (split_seed or split_ids_file in a "
        "new run), or acknowledge it with --capevolve-test-reused"
    )


def record_scored(
    project_dir: Path,
    run_id: str,
    test_ids: list[str],
    *,
    reused: bool,
    keys: dict[str, str] | None = None,
    ledger: Path | None = None,
) -> None:
    """Append this run's scoring, with the tasks' content keys (``keys``: id → key), to the
    project's file (:func:`.project_memory.remember`) and to the shared ``ledger`` when named."""
    row = {"run_id": run_id, "test_ids": sorted(test_ids), "reused": reused}
    row["test_keys"] = sorted(task_keys.Tasks.of(test_ids, keys).keys)
    project_memory.remember(project_dir, SEALS_KIND, row)
    shared_ledger.record(ledger, project_dir, SEALS_KIND, row)


def reused_line(
    run_id: str, found: list[tuple[str, list[str]]], decided: list[tuple[str, list[str]]] | None = None
) -> str:
    """The one line refusing to score test tasks another run of the project scored, or took
    its decisions on as val (``decided``: a candidate was selected on them)."""
    said = []
    if found:
        said.append(f"overlaps test tasks the project already scored ({_runs(found)})")
    if decided:
        said.append(f"holds val tasks the project's decisions were taken on ({_runs(decided)})")
    return (
        f"run {run_id}: its test split {'; and it '.join(said)}; "
        "scoring them again would not be a held-out estimate. Ways on: new test tasks (a new run "
        "with another split_seed or split_ids_file), or acknowledge it with --capevolve-test-reused "
        f"(every table, report, dashboard and junit property then says '{REUSED_LABEL}')"
    )


def _runs(found: list[tuple[str, list[str]]]) -> str:
    return "; ".join(
        f"run {other}: {len(ids)} task(s) {', '.join(ids[:6])}{' …' if len(ids) > 6 else ''}"
        if ids
        else f"run {other}"  # which tasks is not known (a run whose test split is unknown)
        for other, ids in found
    )
