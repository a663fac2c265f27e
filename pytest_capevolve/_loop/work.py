"""Work copies: where an optimizer edits a candidate, ``runs/<id>/work/<TAG>/``.

A copy of the best's snapshot (or ``--from``'s) with the handover files; the parent's snapshot is
never touched. A tag that exists anywhere in the run is refused (rollout files are named by tag)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from .._policy import guards
from .._policy.booking.commit import CommitRefused
from .._policy.booking.journal_entry import JOURNAL
from .._project.candidate import SEED_TAG, check_tag, handover_ignore
from .._project.spec import Spec
from .._store.log.event_kinds import WORK_CREATED
from .._store.rundir import RunDir
from .._store.snapshots import writable_copy
from .handover import write_handover


class WorkCopy(TypedDict):
    """A work copy just made (``capevolve work new``'s answer)."""

    tag: str
    parent: str
    merged_from: NotRequired[list[str]]
    path: str
    journal: str


def new_work_copy(
    spec: Spec,
    rundir: RunDir,
    tag: str,
    parent: str | None = None,
    *,
    files: dict[str, bytes] | None = None,
    merged_from: list[str] | None = None,
) -> WorkCopy:
    """Create the work copy of ``tag`` from ``parent`` (default: the best), or from ``files``
    (relative path → bytes: a merge of ``merged_from``, :mod:`.merge`)."""
    tag = check_tag(tag)
    guards.refuse_finalized(rundir, guards.Checkpoint.WORK)
    parent = parent or rundir.state.best()
    folder = rundir.work_dir(tag)
    taken = set(rundir.snapshots.known_tags()) | {SEED_TAG} | set(rundir.verdicts.verdicts())
    if tag in taken or folder.exists():
        raise CommitRefused(
            f"tag {tag!r} already exists in run {rundir.run_id}; a tag names one candidate forever "
            "(its rollouts are <task>__<tag>__t<k>.json): choose a new tag"
        )
    source = rundir.snapshots.snapshot_dir(parent) if parent != SEED_TAG else spec.capability_path
    if files is not None:
        for relative, data in sorted(files.items()):
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_bytes(data)
        folder.mkdir(parents=True, exist_ok=True)
    elif parent != SEED_TAG and not source.is_dir():
        raise CommitRefused(f"parent {parent!r} has no snapshot in run {rundir.run_id} (was it evaluated?)")
    else:
        writable_copy(source, folder, ignore=handover_ignore(source))
    write_handover(spec, rundir, tag, parent, folder, merged_from=merged_from)
    path, journal = str(folder), str(folder / JOURNAL)
    if merged_from:
        rundir.log.append_event(WORK_CREATED, tag=tag, parent=parent, merged_from=list(merged_from))
        return WorkCopy(tag=tag, parent=parent, merged_from=list(merged_from), path=path, journal=journal)
    rundir.log.append_event(WORK_CREATED, tag=tag, parent=parent)
    return WorkCopy(tag=tag, parent=parent, path=path, journal=journal)
