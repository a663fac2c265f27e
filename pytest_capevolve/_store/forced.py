"""Which accepts carry a label, read from the log for every view that shows one.

Two kinds do: one booked against the gate (``capevolve commit TAG --decision accept --force``),
which is not a measured improvement, and one on bytes another run had decided, gated again after
``--capevolve-harness-changed``. The ``decision`` event keeps the label, and measure, report.md,
``capevolve runs``, LEDGER.md, the finalize summary and the dashboard each ask
:func:`labelled_accepts` and show it beside the tag, so neither passes for a plain gate accept.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .event_kinds import DECISION

FORCED_LABEL = "forced: accepted against the gate"
# the short forms the tables show beside a tag
SHORT = {FORCED_LABEL: "forced"}


def label_of(event: dict[str, Any]) -> str | None:
    """The label an accept's ``decision`` event carries (forced, or re-gated after a harness
    change), or None for a plain gate accept."""
    if event.get("kind") not in (None, DECISION) or event.get("decision") != "accept":
        return None
    if event.get("against_gate"):
        return FORCED_LABEL
    label = event.get("label")
    return label if isinstance(label, str) and label else None


def labelled_accepts(events: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Tag → the label of its accept, for each accept booked with one."""
    found: dict[str, str] = {}
    for event in events:
        if event.get("kind") == DECISION and (label := label_of(event)) is not None:
            found[str(event.get("tag"))] = label
    return found


def short(label: str) -> str:
    """``forced``, or the label's words before its dash (``re-gated after a harness change``)."""
    return SHORT.get(label) or label.split(" — ")[0]
