"""The first decision stands: a registered tag's verdict, once it decided, is not taken again.

A gate session asked for a tag that already has a decisive verdict (accept, reject, a repeat,
provisional or inconclusive) does not judge it a second time — not alone at the full α after a
Holm round rejected it, not against a new best, not under new gate flags. The session
re-derives the recorded decision at its recorded level (:func:`.regate.regate`, as
``capevolve gate`` does), pays nothing, writes no verdict and exits with that decision's code.

What may still be gated again under the same tag: a verdict that decided nothing (indecisive on
coverage, an interrupted sequential gate's ``undecided``) — the resume that pays what is
missing — and a provisional verdict grown by a grow session (:mod:`.._session.grow`, which
adds a look and passes ``replacing=True`` to the store).

Controller side or the CLI; pays nothing, writes nothing.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from .._decide.looks import shown_decision
from .._decide.verdict import Verdict
from .._store.rundir import RunDir
from .identity import registered_hashes

# what a verdict stands for when it decided something (``shown_decision``'s words)
DECIDED = ("accept", "reject", "repeat", "provisional", "inconclusive")


def standing_verdict(rundir: RunDir, tag: str) -> dict[str, Any] | None:
    """The verdict ``tag`` was decided by, checked against the log (an edited file is refused,
    RunDirError); None when the run never registered the tag, its verdict decided nothing, or it
    was a screen's refusal before any rollout (the screen decides such a tag again)."""
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
    """A verdict file read back as the verdict it records (a rule :mod:`.regate` does not
    re-derive, the sequential gate's, is shown as it decided)."""
    names = {f.name for f in fields(Verdict)}
    return Verdict(**{k: v for k, v in recorded.items() if k in names})


def already_decided_reason(recorded: dict[str, Any], rederived: str) -> str:
    """The reason a gate session prints for a tag it did not judge again."""
    return (
        f"already decided against {recorded.get('against')!r}: the first verdict stands, "
        f"re-derived, nothing paid or written (a tag is decided once; new bytes need a new tag) — "
        f"{rederived}"
    )
