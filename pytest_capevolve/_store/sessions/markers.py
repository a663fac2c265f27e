"""A session's markers, read by its xdist workers before every rollout (only the controller records).

``live/<token>``: made when the controller plans and removed however it stops, so a worker running
on after it stopped pays no rollouts nobody records; each worker also watches its parent, since
``kill -9`` leaves the marker. ``sequential-stop/<token>.json``: the tags the sequential gate no
longer needs rollouts of, as the controller cannot un-schedule sent items (an old session's marker
never stops a new one)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..files import atomic_write_json, read_json


def live_path(run_root: Path, token: str) -> Path:
    return run_root / "live" / token


def stop_path(run_root: Path, token: str) -> Path:
    return run_root / "sequential-stop" / f"{token}.json"


def create_live(run_root: Path, token: str) -> None:
    path = live_path(run_root, token)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def write_stopped(run_root: Path, token: str, tags: set[str]) -> None:
    atomic_write_json(stop_path(run_root, token), {"stopped": sorted(tags)})


def read_stopped(run_root: Path, token: str) -> set[str]:
    try:
        return set(read_json(stop_path(run_root, token))["stopped"])
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def remove(marker: Path) -> None:
    """The marker, and its folder once empty."""
    with contextlib.suppress(OSError):
        marker.unlink()
    with contextlib.suppress(OSError):
        marker.parent.rmdir()


class ControllerWatch:
    """On a worker: has the controller that started it stopped? Asked before every rollout."""

    def __init__(self, run_root: Path, token: str) -> None:
        self.path = live_path(run_root, token)
        self.parent = os.getppid()
        self.watch_marker = self.path.exists()  # not shared with this machine: the parent alone
        self.stopped = False

    def controller_stopped(self) -> bool:
        if not self.stopped:
            self.stopped = os.getppid() != self.parent or (self.watch_marker and not self.path.exists())
        return self.stopped
