"""The sequential gate's stop marker: which tags a session no longer needs rollouts of.

The controller decides (its e-processes cross) but under xdist it cannot un-schedule items it
already sent; so it writes ``runs/<id>/sequential-stop/<token>.json`` (atomic) and every worker
reads it before each rollout. The token is the session's own, so a marker left by an earlier
session never stops this one. A worker on another machine without the shared run dir never
sees the marker and may pay a few more rollouts; they are persisted like any other.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from .files import atomic_write_json, read_json

FOLDER = "sequential-stop"


def marker_path(run_root: Path, token: str) -> Path:
    return run_root / FOLDER / f"{token}.json"


def write_stopped(run_root: Path, token: str, tags: set[str]) -> None:
    """Controller only: the tags whose remaining rollouts are not to be paid."""
    atomic_write_json(marker_path(run_root, token), {"stopped": sorted(tags)})


def read_stopped(run_root: Path, token: str) -> set[str]:
    """Any process: the stopped tags, empty when there is no marker (or it cannot be read)."""
    try:
        return set(read_json(marker_path(run_root, token))["stopped"])
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def remove(run_root: Path, token: str) -> None:
    with contextlib.suppress(OSError):
        marker_path(run_root, token).unlink()
    with contextlib.suppress(OSError):
        (run_root / FOLDER).rmdir()
