"""A session's live marker: workers start no rollout once the controller has stopped.

Under xdist only the controller records, so a worker running on after it stopped pays rollouts nobody
records. The controller makes ``live/<token>`` when it plans and removes it however it stops; each
worker checks the marker and its parent (``kill -9`` leaves the marker) before every rollout."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

FOLDER = "live"


def marker_path(run_root: Path, token: str) -> Path:
    return run_root / FOLDER / token


def create(run_root: Path, token: str) -> None:
    path = marker_path(run_root, token)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def remove(run_root: Path, token: str) -> None:
    with contextlib.suppress(OSError):
        marker_path(run_root, token).unlink()
    with contextlib.suppress(OSError):
        (run_root / FOLDER).rmdir()


class ControllerWatch:
    """On a worker: has the controller that started it stopped? Asked before every rollout."""

    def __init__(self, run_root: Path, token: str) -> None:
        self.path = marker_path(run_root, token)
        self.parent = os.getppid()
        self.watch_marker = self.path.exists()  # not shared with this machine: the parent alone
        self.stopped = False

    def controller_stopped(self) -> bool:
        if not self.stopped:
            self.stopped = os.getppid() != self.parent or (self.watch_marker and not self.path.exists())
        return self.stopped
