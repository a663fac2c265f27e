"""The first decision stands: a registered tag's verdict, once it decided, is not taken again.

A gate session asked for it re-derives the recorded decision at its level, pays and writes nothing, and exits
with that decision's code; a verdict that decided nothing may be resumed, and a provisional one grown."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ..._decide.looks import shown_decision
from ..._decide.verdict import Verdict
from ..._store.rundir import RunDir
from .identity import registered_hashes

# what a verdict stands for when it decided something (``shown_decision``'s words)
DECIDED = ("accept", "reject", "repeat", "provisional", "inconclusive")


def standing_verdict(rundir: RunDir, tag: str) -> dict[str, Any] | None:
    """The verdict ``tag`` was decided by, checked against the log; None when unregistered, undecided, or a
    screen's refusal before any rollout."""
    if tag not in registered_hashes(rundir):
        return None
    recorded = rundir.verdicts.checked(tag)
    if recorded is None or not recorded.get("n_tasks"):  # decided before any rollout: a screen's
        return None
    looks = (recorded.get("details") or {}).get("looks")
    shown = shown_decision(
        str(recorded.get("decision")), recorded.get("basis"), recorded.get("delta_mean"), looks
    )
    return recorded if shown in DECIDED else None


def recorded_verdict(recorded: dict[str, Any]) -> Verdict:
    """A verdict file read back as it records (the sequential gate's is shown as it decided)."""
    names = {f.name for f in fields(Verdict)}
    return Verdict(**{k: v for k, v in recorded.items() if k in names})


def already_decided_reason(recorded: dict[str, Any], rederived: str) -> str:
    return (
        f"already decided against {recorded.get('against')!r}: the first verdict stands, "
        f"re-derived, nothing paid or written (a tag is decided once; new bytes need a new tag) — "
        f"{rederived}"
    )
