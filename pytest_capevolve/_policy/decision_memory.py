"""The project's memory of decided bytes, kept outside any one run folder.

:func:`.identity.decided_in_project` finds bytes another run of the project decided by reading
the other runs' logs — which forgets a run folder moved out of the project (``mv
.capevolve/runs/<id> /tmp``) or deleted, and then the same refuted bytes are gated afresh at a
new run's α. So each booked decision is also remembered, one line each, in the project's memory
(:mod:`.._store.project_memory`: ``.capevolve/decisions.jsonl`` and a copy outside the project):
the bytes, the val task set, the tag, the run, the decision, its level and the harness it was
taken under. A row is a fact about a run that may no longer be there; a run folder still there
is read from its log instead (the log is the record).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._store import project_memory

KIND = "decisions"


def val_key(val_ids: Iterable[str]) -> str:
    """The val task set as one digest: a decision answers a question on these tasks only."""
    return hashlib.sha256("\n".join(sorted(val_ids)).encode("utf-8")).hexdigest()


def remember_decision(
    project_dir: Path,
    *,
    run_id: str,
    tag: str,
    content_hash: str,
    val_ids: Iterable[str],
    decision: str,
    level: str | None,
    harness: dict[str, str] | None,
) -> None:
    row = {
        "run_id": run_id,
        "tag": tag,
        "content_hash": content_hash,
        "val": val_key(val_ids),
        "decision": decision,
        "level": level,
        "harness": dict(harness or {}),
    }
    project_memory.remember(project_dir, KIND, row)


def remembered_decisions(project_dir: Path, val_ids: Iterable[str]) -> list[dict[str, Any]]:
    """Every remembered decision on this val task set, oldest first (both copies; a row in
    both is one decision), each a dict with the keys :func:`remember_decision` writes."""
    mine = val_key(val_ids)
    seen: set[tuple[str, str, str]] = set()
    rows = []
    for row, _source in project_memory.recalled(project_dir, KIND):
        fields = (row.get("run_id"), row.get("tag"), row.get("content_hash"))
        if row.get("val") != mine or not all(isinstance(f, str) for f in fields) or fields in seen:
            continue
        if not isinstance(row.get("decision"), str):
            continue
        seen.add(fields)  # type: ignore[arg-type]
        rows.append(row)
    return rows
