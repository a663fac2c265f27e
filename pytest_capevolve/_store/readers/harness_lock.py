"""The harness locked with the run: its fingerprint is an event near the head of the log.

The first session logs the harness's digests; every later session refuses a change before it plans.
The event is read with its hash links checked, so editing it means rewriting the chain."""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..._project import harness
from ..._project.way_on import pasteable
from ..files import RunDirError
from ..log.event_chain import GENESIS, event_line_hash
from ..log.event_kinds import HARNESS_LOCKED, ROLLOUT
from ..rundir import RunDir

HEAD_LINES = 256  # a run's first session logs the lock among its first few events


class HarnessChanged(RunDirError):
    """The harness moved since the run began; the message names the files and the way on."""


def check_or_lock(rundir: RunDir, digests: Mapping[str, str], *, finalize: bool = False) -> bool:
    """Refuse a harness that differs from the run's lock (``finalize``: with a finalize's way on); lock it
    (and return True) when there is none."""
    with rundir.lock():
        locked = locked_harness(rundir)
        if locked is None:
            rundir.log.append_event(HARNESS_LOCKED, files=dict(sorted(digests.items())))
            return True
    changed = harness.changes(locked, digests)
    if changed:
        raise HarnessChanged(
            pasteable(harness.refusal(rundir.run_id, changed, finalize=finalize), rundir.project_dir)
        )
    return False


def locked_harness(rundir: RunDir) -> dict[str, str] | None:
    """The digests the harness was locked with, or None; RunDirError when the lines up to it do not chain."""
    found = _from_head(rundir)
    if found is not None:
        return found
    # a run older than the lock: its event, if any, stands wherever its next session put it
    for event in reversed(rundir.log.events()):
        if event.get("kind") == HARNESS_LOCKED:
            return dict(event.get("files") or {})
    return None


def _from_head(rundir: RunDir) -> dict[str, str] | None:
    path = rundir.events_path
    if not path.is_file():
        return None
    prev, found = GENESIS, None
    with open(path, encoding="utf-8") as log:
        for number, line in enumerate(log, start=1):
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            if not isinstance(event, dict):
                raise RunDirError(f"{path}: line {number} is not an event (edited); run `capevolve verify`")
            if event.get("prev") != prev:
                raise RunDirError(
                    f"{path}: line {number} does not chain to the line before (edited); the harness "
                    "lock cannot be read. Run `capevolve verify`; restore the log or start a new run"
                )
            if found is not None:
                return found  # the line after the lock chains to it: the lock is as written
            if event.get("kind") == HARNESS_LOCKED:
                found = dict(event.get("files") or {})
            elif event.get("kind") == ROLLOUT or number >= HEAD_LINES:
                return None
            prev = event_line_hash(line)
    return found  # the lock is the log's last line: the chain cannot vouch for its own end
