"""One seal per project's test tasks: which test tasks any run of the project has scored.

A new run drawing the same test tasks would score them again and call the number held out, so a
finalize overlapping a scored test split is refused unless acknowledged ("test reused"). Scorings
count from every run's events and from ``test_seals.jsonl`` (which survives a deleted run folder);
a half-erased run whose test status is unknown counts as scored."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..files import RunDirError
from ..log.event_kinds import TEST_SCORED
from ..rundir import RUNS_DIR, RunDir
from . import project_memory, shared_ledger, task_keys

SEALS_KIND = "test_seals"
PROJECT_SEALS = f"{SEALS_KIND}.jsonl"
REUSED_LABEL = "test reused — not a held-out estimate"
Found = list[tuple[str, list[str]]]  # (a run as a refusal names it, the tasks it shares)


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
        """The run as a refusal names it."""
        if self.unknown:
            return f"{self.run_id} (test status unknown: {self.unknown})"
        if self.project:
            return f"{self.run_id} ({shared_ledger.label(self.project, self.source)})"
        return self.run_id

    @property
    def tasks(self) -> task_keys.Tasks:
        return task_keys.Tasks(self.test_ids, self.test_keys)


def scored_tests(project_dir: Path, pool_keys: Any = (), ledger: Path | None = None) -> list[ScoredTests]:
    """Every run that scored its test split or whose status is unknown, and the shared ``ledger``'s
    runs of other projects whose scored tasks share content with ``pool_keys``."""
    found: dict[tuple[str | None, str], ScoredTests] = {}
    entries = _remembered(project_dir, pool_keys, ledger)
    entries += [run for root in sorted((project_dir / RUNS_DIR).glob("*")) if (run := _run_entry(root))]
    for entry in entries:
        earlier = found.get((entry.project, entry.run_id))
        ids = entry.test_ids | (earlier.test_ids if earlier else frozenset())
        keys = entry.test_keys | (earlier.test_keys if earlier else frozenset())
        found[entry.project, entry.run_id] = replace(entry, test_ids=ids, test_keys=keys)
    return sorted(found.values(), key=lambda s: s.run_id)


def _run_entry(root: Path) -> ScoredTests | None:
    """What one run folder says of its test split: scored, unknown, or nothing."""
    if not root.is_dir():
        return None
    rundir = RunDir(root)
    why = None
    scored: list[dict[str, Any]] = []
    if not rundir.events_path.is_file():
        if all(p.name.endswith(".lock") for p in root.iterdir()):  # nothing of a run's but locks
            return None
        why = "its folder holds a run's files but no events.jsonl"
    else:
        try:
            scored = rundir.log.of_kinds(TEST_SCORED)
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


def _remembered(project_dir: Path, pool_keys: Any = (), ledger: Path | None = None) -> list[ScoredTests]:
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
    *,
    unknown_is_any: bool = True,
) -> Found:
    """(run, shared tasks) for every other run that scored any of ``test_ids``, oldest first; a run
    whose status and test split are unknown may have scored any, unless ``unknown_is_any`` is off."""
    scored_runs = scored_tests(project_dir, (keys or {}).values(), ledger)
    return shared_with(scored_runs, run_id, test_ids, keys, unknown_is_any=unknown_is_any)


def shared_with(
    scored_runs: list[ScoredTests],
    run_id: str,
    test_ids: list[str],
    keys: dict[str, str] | None = None,
    *,
    unknown_is_any: bool = True,
) -> Found:
    """:func:`overlaps` on runs already read (``scored_tests``): a reader of many runs reads them once."""
    others = [scored for scored in scored_runs if scored.run_id != run_id or scored.project is not None]
    if not others:  # most projects: no other run scored its test split
        return []
    mine = task_keys.Tasks.of(test_ids, keys)
    found = []
    for scored in others:
        unknown_split = unknown_is_any and scored.unknown and not scored.test_ids
        shared = sorted(mine.ids) if unknown_split else mine.shared(scored.tasks, keys)
        if shared:
            found.append((scored.named(), shared))
    return found


# a new split_seed deals the scored tasks into some split again (refused): the way on names them
NEW_SPLITS = (
    "a new run whose split_ids_file leaves these tasks out of its {where} (write it into the spec before "
    "that run starts: the file is harness; a new split_seed would deal them in again)"
)


def sealed_in_dev(
    project_dir: Path,
    run_id: str,
    splits: Any,
    keys: dict[str, str] | None = None,
    ledger: Path | None = None,
) -> Found:
    """(run, tasks) of other runs whose scored test tasks val or train holds."""
    dev = [str(t) for name in ("val", "train") for t in splits.get(name, [])]
    return overlaps(project_dir, run_id, dev, keys, ledger, unknown_is_any=False)


def sealed_dev_line(run_id: str, found: Found) -> str:
    return (
        f"run {run_id}: its val/train splits hold test tasks the project already scored ({_runs(found)}); "
        "the test split is sealed for the project, so gating or training on them would select on "
        f"held-out tasks. Ways on: {NEW_SPLITS.format(where='train and val')}, or acknowledge it "
        "with --capevolve-test-reused"
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
    """Append this run's scoring to the project's file and to the shared ``ledger``."""
    row = {"run_id": run_id, "test_ids": sorted(test_ids), "reused": reused}
    row["test_keys"] = sorted(task_keys.Tasks.of(test_ids, keys).keys)
    project_memory.remember(project_dir, SEALS_KIND, row)
    shared_ledger.record(ledger, project_dir, SEALS_KIND, row)


def reused_line(run_id: str, found: Found, decided: Found | None = None) -> str:
    """The one line refusing to score test tasks another run scored, or decided on as val."""
    said = []
    if found:
        said.append(f"overlaps test tasks the project already scored ({_runs(found)})")
    if decided:
        said.append(f"holds val tasks the project's decisions were taken on ({_runs(decided)})")
    return (
        f"run {run_id}: its test split {'; and it '.join(said)}; "
        f"scoring them again would not be a held-out estimate. Ways on: {NEW_SPLITS.format(where='test')}, "
        "or acknowledge it with --capevolve-test-reused "
        f"(every table, report, dashboard and junit property then says '{REUSED_LABEL}')"
    )


def _runs(found: Found) -> str:
    return "; ".join(
        f"run {other}: {len(ids)} task(s) {', '.join(ids[:6])}{' …' if len(ids) > 6 else ''}"
        if ids
        else f"run {other}"  # which tasks is not known (a run whose test split is unknown)
        for other, ids in found
    )
