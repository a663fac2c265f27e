"""The project's memory of decided bytes, kept outside any one run folder.

A run folder moved out or deleted would take its decisions along, and refuted bytes would be gated afresh: so
each booked decision is also remembered in ``.capevolve/decisions.jsonl`` (bytes, val tasks by id and content
key, tag, run, decision, level, harness). Other projects are reached only through a shared ledger."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._store.log.event_kinds import DECISION
from ..._store.memory import project_memory, shared_ledger
from ..._store.memory.task_keys import Tasks

if TYPE_CHECKING:
    from ..._store.rundir import RunDir

KIND = "decisions"


def val_key(val_ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(val_ids)).encode("utf-8")).hexdigest()


def remember_decision(
    rundir: RunDir, project_dir: Path, tag: str, content_hash: str, decision: str, level: str | None
) -> None:
    """Remember ``rundir``'s decision on ``tag`` in the project's memory, and in the run's shared ledger."""
    from ..._store.memory import task_keys
    from ..._store.readers.harness_lock import locked_harness

    val_ids = list((rundir.splits() or {}).get("val", []))
    row = {
        "run_id": rundir.run_id,
        "tag": tag,
        "content_hash": content_hash,
        "val": val_key(val_ids),
        "decision": decision,
        "level": level,
        "harness": dict(locked_harness(rundir) or {}),
        **Tasks.of(val_ids, task_keys.recorded(rundir)).row("val"),
    }
    project_memory.remember(project_dir, KIND, row)
    shared_ledger.record(shared_ledger.of_run(rundir), project_dir, KIND, row)


def remembered_decisions(
    project_dir: Path, pool_keys: Iterable[str] = (), ledger: Path | None = None
) -> list[tuple[dict[str, Any], Tasks]]:
    """Every remembered decision, oldest first, with the val tasks it was taken on; from the shared
    ``ledger``, other projects' decisions matched by ``pool_keys`` (content only, with their ``project``)."""
    seen: set[tuple[Any, ...]] = set()
    rows = []
    recalled = [(row, False) for row in project_memory.recalled(project_dir, KIND)]
    recalled += [(row, True) for row in shared_ledger.meeting(ledger, project_dir, KIND, "val", pool_keys)]
    for row, foreign in recalled:
        if not foreign:
            row = {k: v for k, v in row.items() if k != "project"}
        fields = (row.get("project"), row.get("run_id"), row.get("tag"), row.get("content_hash"))
        if not all(isinstance(f, str) for f in (*fields[1:], row.get("decision"))) or fields in seen:
            continue
        seen.add(fields)
        rows.append((row, Tasks.from_row(row, "val", foreign=foreign)))
    return rows


def decided_on(
    project_dir: Path,
    run_id: str,
    test_ids: list[str],
    keys: dict[str, str] | None,
    ledger: Path | None = None,
) -> list[tuple[str, list[str]]]:
    """(run, shared tasks) for every other run whose decisions were taken on a val holding some of
    ``test_ids`` (by id or content): from logs, the memory for runs gone, and the shared ``ledger``."""
    from ..._store.files import RunDirError
    from ..._store.memory import task_keys
    from ..._store.rundir import RUNS_DIR, RunDir

    mine = Tasks.of(test_ids, keys)
    found: dict[str, list[str]] = {}
    for root in sorted((project_dir / RUNS_DIR).glob("*")):
        if root.name == run_id or not (root / "events.jsonl").is_file():
            continue
        other = RunDir(root)
        try:
            if not other.log.of_kinds(DECISION):
                continue
            theirs = Tasks.of((other.splits() or {}).get("val", []), task_keys.recorded(other))
        except (RunDirError, OSError, ValueError):
            continue
        if shared := mine.shared(theirs, keys):
            found[other.run_id] = shared
    for row, val in remembered_decisions(project_dir, (keys or {}).values(), ledger):
        run = str(row["run_id"])
        if "project" in row:  # another project's, from the shared ledger
            run = f"{run} ({shared_ledger.label(row['project'], str(ledger))})"
        elif run == run_id or run in found:
            continue
        if shared := mine.shared(val, keys):
            found[run] = shared
    return [(f"{run} (its val: decisions were taken on them)", ids) for run, ids in sorted(found.items())]
