"""A session's live marker: workers start no rollout once the controller has stopped.

Under xdist the controller alone records rollouts; a worker that goes on after the controller
stopped — Ctrl-C, a full disk, an internal error, ``kill -9`` — pays for rollouts nobody will
record, and the next session pays them again. So the controller makes
``runs/<id>/live/<token>`` when it plans (the token is the session's own) and removes it the
moment it stops, however it stops; an unlink succeeds on a full disk. Every worker asks before
each rollout whether the marker is still there and whether its parent is still the controller
that started it (a ``kill -9`` leaves the marker but not the parent), and starts nothing once
either is gone: at most the rollouts already in flight are lost.

A worker on another machine without the shared run dir never saw the marker, and watches only
its parent.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

FOLDER = "live"


def marker_path(run_root: Path, token: str) -> Path:
    return run_root / FOLDER / token


def create(run_root: Path, token: str) -> None:
    """Controller only, when it plans."""
    path = marker_path(run_root, token)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def remove(run_root: Path, token: str) -> None:
    """Controller only, as it stops (any way): its workers start nothing more."""
    with contextlib.suppress(OSError):
        marker_path(run_root, token).unlink()
    with contextlib.suppress(OSError):
        (run_root / FOLDER).rmdir()


class ControllerWatch:
    """On a worker: has the controller that started it stopped? Asked before every rollout
    (a ``getppid`` and a ``stat``: microseconds against a rollout's hundreds)."""

    def __init__(self, run_root: Path, token: str) -> None:
        self.path = marker_path(run_root, token)
        self.parent = os.getppid()
        self.watch_marker = self.path.exists()  # not shared with this machine: the parent alone
        self.stopped = False

    def controller_stopped(self) -> bool:
        if not self.stopped:
            self.stopped = os.getppid() != self.parent or (self.watch_marker and not self.path.exists())
        return self.stopped
