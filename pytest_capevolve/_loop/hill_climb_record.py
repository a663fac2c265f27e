"""What ``capevolve hill-climb`` leaves of each decided iteration, in the user's process: its
``outcome.json`` and its commit in the candidate store (:mod:`.git_store`), the seed first —
each commit message carrying the log's head, kept off the run dir (:mod:`.._store.readers.anchor`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._project.candidate import SEED_TAG
from .._store.files import atomic_write_json, read_json
from .._store.readers.anchor import head
from .._store.rundir import RunDir
from .git_store import CandidateStore, StoreError
from .iteration_outcome import booked_reason, outcome_message, outcome_record


class LoopIncomplete(Exception):
    """An evaluation did not complete (no verdict); ``--resume`` continues it."""


def finish(
    store: CandidateStore,
    store_kind: str,
    rundir: RunDir,
    cid: str,
    entry: dict[str, Any],
    log: Callable[[str], object],
) -> None:
    """The outcome file and the store's commit of ``cid``, whose booked decision is ``entry``."""
    folder = rundir.hill_climb_dir(cid)
    meta = dict(read_json(folder / "iteration.json"))
    verdict = rundir.verdicts.verdict(cid) or {}
    reason = booked_reason(verdict, str(entry["decision"]))
    message = outcome_message(meta, cid, entry, reason)
    snapshot = rundir.snapshots.snapshot_dir(cid)
    files = snapshot if snapshot.is_dir() else rundir.work_dir(cid)
    anchored = f"{message}\n\n{head(rundir.log).trailer()}"  # the log's head, kept off the run dir
    ref = record(store, store_kind, cid, files, anchored, accepted=entry["decision"] == "accept")
    optimizer = folder / "optimizer.json"
    outcome = outcome_record(
        meta,
        cid,
        entry,
        reason=reason,
        optimizer=read_json(optimizer).get("outcome") if optimizer.is_file() else None,
        store=store_kind,
        store_ref=ref,
        message=message,
    )
    if not (folder / "outcome.json").is_file():
        atomic_write_json(folder / "outcome.json", outcome)
        log(message)


def store_seed(store: CandidateStore, store_kind: str, rundir: RunDir, capability_path: Path) -> None:
    """The seed's commit, once: its snapshot, or the capability itself before there is one."""
    if store.holds(SEED_TAG):
        return
    snapshot = rundir.snapshots.snapshot_dir(SEED_TAG)
    files = snapshot if snapshot.is_dir() else capability_path
    message = f"iter 0: seed (the baseline)\n\n{head(rundir.log).trailer()}"
    record(store, store_kind, SEED_TAG, files, message, accepted=True)


def record(
    store: CandidateStore, store_kind: str, tag: str, files: Path, message: str, *, accepted: bool
) -> Any:
    """Hand one candidate to the store; a failing store stops the loop in one line (the decision
    is booked; the next hill-climb records it)."""
    try:
        return store.record(tag, files, message, accepted=accepted)
    except (StoreError, OSError) as exc:
        raise LoopIncomplete(
            f"the {store_kind} store did not record {tag}: {exc}; its decision is booked, "
            "and capevolve hill-climb records it once the store works"
        ) from None
