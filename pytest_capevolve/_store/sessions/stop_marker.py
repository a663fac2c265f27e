"""The sequential gate's stop marker: which tags a session no longer needs rollouts of.

Under xdist the controller cannot un-schedule sent items, so it writes ``sequential-stop/<token>.json``
and every worker reads it before each rollout (an old session's marker never stops a new one)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..files import atomic_write_json, read_json

FOLDER = "sequential-stop"


def marker_path(run_root: Path, token: str) -> Path:
    return run_root / FOLDER / f"{token}.json"


def write_stopped(run_root: Path, token: str, tags: set[str]) -> None:
    atomic_write_json(marker_path(run_root, token), {"stopped": sorted(tags)})


def read_stopped(run_root: Path, token: str) -> set[str]:
    try:
        return set(read_json(marker_path(run_root, token))["stopped"])
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def remove(run_root: Path, token: str) -> None:
    with contextlib.suppress(OSError):
        marker_path(run_root, token).unlink()
    with contextlib.suppress(OSError):
        (run_root / FOLDER).rmdir()
