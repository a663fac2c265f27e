"""When null controls stop being paid for: once one has shown a spread of exactly 0.

Another null of the same best under the same locked harness can only repeat that, so planning keeps it (it
still sets the floor) and pays for no other until the best changes."""

from __future__ import annotations

from ..._store.rundir import RunDir


def identical_null(rundir: RunDir, best: str, n_tasks: int, nulls: int) -> str | None:
    """The first of the best's nulls whose checked verdict has every one of ``n_tasks`` deltas exactly 0."""
    for i in range(1, nulls + 1):
        tag = f"{best}-null{i}"
        if tag not in rundir.snapshots.known_tags():
            continue
        verdict = rundir.verdicts.checked(tag)  # as the gate logged it, or refused
        if not verdict or not verdict.get("null_control") or verdict.get("against") != best:
            continue
        rows = list((verdict.get("per_task") or {}).values())
        if len(rows) == n_tasks and n_tasks > 0 and all(row.get("delta") == 0 for row in rows):
            return tag
    return None


def identical_note(tag: str, best: str) -> str:
    return (
        f"null controls: {tag} showed a spread of exactly 0 against {best!r} (a reproducible agent); "
        "no other null is paid for while the best, the adapter and the spec are unchanged"
    )
