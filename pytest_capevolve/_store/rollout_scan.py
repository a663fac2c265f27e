"""One read of every rollout file, for ``capevolve verify``: each file opened once, its bytes
parsed once and its size and mtime taken from the open file, with names kept as strings.

The audit (:mod:`.audit`) checks the files against the log and the index view
(:mod:`.index_sync`) checks its rows against the same files; both read this one scan, so a
60,000-rollout run is read once (it was read twice, with three ``Path`` operations per file
per check). Reads only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

FIELDS = ("split", "task_id", "tag", "trial", "reward", "infra_error", "cost_usd")


class ScannedFile(NamedTuple):  # a tuple: 60,000 of them are built in one scan
    """One rollout file as read: ``rel`` is ``rollouts/<split>/<name>``; ``data`` the fields the
    checks compare (:data:`FIELDS`: a missing one is absent; the record itself is not kept, so
    60,000 files hold a few MB), or None with ``error`` saying why it could not be read."""

    split: str
    name: str
    rel: str
    data: Any
    error: str | None
    size: int
    mtime_ns: int


def scan_rollouts(root: Path) -> list[ScannedFile]:
    """Every ``rollouts/<split>/*.json`` under the run dir ``root`` (split folders whose name
    starts with a dot — quarantine — are left out), sorted by (split, name)."""
    base = os.path.join(root, "rollouts")
    try:
        splits = sorted(e.name for e in os.scandir(base) if e.is_dir() and not e.name.startswith("."))
    except FileNotFoundError:
        return []
    scanned = []
    for split in splits:
        folder = os.path.join(base, split)
        for name in sorted(n for n in os.listdir(folder) if n.endswith(".json")):
            scanned.append(_read(f"{folder}/{name}", split, name))
    return scanned


def _read(path: str, split: str, name: str) -> ScannedFile:
    rel = f"rollouts/{split}/{name}"
    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            raw = handle.read()
    except OSError as exc:
        return ScannedFile(split, name, rel, None, str(exc), -1, -1)
    try:
        record = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        return ScannedFile(split, name, rel, None, str(exc), stat.st_size, stat.st_mtime_ns)
    data = {f: record[f] for f in FIELDS if f in record} if isinstance(record, dict) else record
    return ScannedFile(split, name, rel, data, None, stat.st_size, stat.st_mtime_ns)
