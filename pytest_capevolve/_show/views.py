"""``report.md`` and ``dashboard.html`` at the end of a session: drawn again only when what they
show has moved.

Controller only, from ``record_finish``. ``views.json`` records what the pages were drawn from
(:func:`_inputs`, and the log's place); a session that changed none of it, such as a resume with
everything persisted, does not redraw them."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from typing import Any

from .. import __version__
from .._project.candidate import SEED_TAG
from .._project.spec import Spec
from .._store.log.event_kinds import (
    ROLLOUTS_SUMMARIZED,
    SESSION_FINISHED,
    SESSION_LEFT,
    SESSION_LOAD,
    SESSION_STARTED,
)
from .._store.rollouts.index import IndexDamaged
from .._store.rundir import RunDir

# nothing a page shows (the sealed summary's line and the line after it come after the pages' stamp)
QUIET_EVENTS = frozenset({SESSION_STARTED, SESSION_FINISHED, SESSION_LOAD, ROLLOUTS_SUMMARIZED, SESSION_LEFT})


def refresh(spec: Spec, rundir: RunDir, known: dict[str, Any]) -> str | None:
    """Write report.md and dashboard.html unless current; the problem in one line if either
    could not be written. ``known``: split → records the session has just read."""
    try:
        inputs = _inputs(spec, rundir)
        if _current(rundir, inputs):
            return None
    except Exception as exc:  # could not tell: draw them
        rundir.notices.append(f"could not tell whether report.md is current ({exc!r}); drawn again")
        inputs = None
    from .dashboard import write_dashboard
    from .measure import measure, render_markdown

    problems = []
    measurement = None
    try:
        measurement = measure(spec, rundir, known)
        rundir.write_report(render_markdown(measurement))
    except Exception as exc:  # the report is a view; it must never change the outcome
        problems.append(f"could not write report.md: {exc!r}")
    try:
        write_dashboard(rundir, spec.num_trials, measurement, _every_val_tag(rundir, known))
    except Exception as exc:  # a view too
        problems.append(f"could not write dashboard.html: {exc!r}")
    if not problems and inputs is not None:
        size, _, seq = rundir.log.tail()
        rundir.pages_stamp.write({"events": [size, seq], **_inputs(spec, rundir)})
    return "; ".join(problems) or None


def _every_val_tag(rundir: RunDir, known: dict[str, Any]) -> Any:
    """The session's val records when they hold every tag with a val rollout, else None."""
    val = known.get("val")
    if not val:
        return None
    try:
        return val if rundir.index.tags("val") <= set(val) else None
    except (IndexDamaged, OSError, sqlite3.Error):  # a cache that cannot tell: the dashboard reads
        return None


def _current(rundir: RunDir, inputs: dict[str, Any]) -> bool:
    stamp = rundir.pages_stamp.read()
    if not stamp or not isinstance(stamp.get("events"), list):
        return False
    offset, seq = stamp["events"]
    # only whether a shown event came is asked: a marker is held, never the event
    moved = rundir.log.events_after(
        int(offset), int(seq), lambda event: True if event.get("kind") not in QUIET_EVENTS else None
    )
    if moved is None or moved[0]:
        return False
    return {k: v for k, v in stamp.items() if k != "events"} == inputs


def _inputs(spec: Spec, rundir: RunDir) -> dict[str, Any]:
    """What the pages are drawn from, less the log (JSON-able, compared for equality): state less
    its spend bookmark, the index's rows, the files below, the spec values the pages use."""
    state = rundir.state.read_state()
    state.pop("spent_through", None)
    best = str(state.get("best_id", SEED_TAG))
    splits = rundir.splits() or {}
    # checked against the files (as columns: no record made, and no row while the sealed summary serves)
    if splits.get("val"):
        rundir.rollouts.indexed_columns("val")
    if splits.get("train"):
        rundir.rollouts.indexed_columns("train", {SEED_TAG, best})
    files = [
        rundir.splits_path,
        rundir.spec_lock_path,
        rundir.root / "seal.json",
        *sorted((rundir.root / "verdicts").glob("*.json")),
    ]
    stats: dict[str, list[int] | None] = {}
    for path in files:
        try:
            stat = os.stat(path)
            stats[path.relative_to(rundir.root).as_posix()] = [stat.st_size, stat.st_mtime_ns]
        except FileNotFoundError:
            stats[path.relative_to(rundir.root).as_posix()] = None
    state_hash = hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()
    return {
        # a page deleted by hand is drawn again
        "pages": [rundir.report_path.is_file(), rundir.dashboard_path.is_file()],
        "version": __version__,
        "spec": [spec.num_trials, spec.base_seed, spec.gate_alpha],
        "rows": rundir.index.rows_version(),
        "state": state_hash,
        "files": stats,
    }
