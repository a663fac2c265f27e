"""Which accepts were forced against the gate, read from the log for every view that shows one.

``capevolve commit TAG --decision accept --force`` books an accept the gate did not give: the
record keeps it (a decision is the optimizer's, the verdict is the evidence), but a best chosen
that way is not a measured improvement. Only LEDGER.md used to say so; a rejected no-op became
the best in ``measure``, report.md, ``capevolve runs``, the finalize summary and the dashboard
with nothing to tell it from a gate accept. Each of them asks :func:`labelled_accepts` and shows
the label beside the tag.

A second kind of accept carries a label the same way: one taken on bytes another run had
decided, gated again because the user said the harness changed in a way that matters
(``--capevolve-harness-changed``). The session printed the label; the decision event keeps it
(``label``), so report.md, the dashboard, LEDGER.md, ``measure``, ``runs`` and the finalize
summary show it too — a red team saw it vanish from every view after the session.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FORCED_LABEL = "forced: accepted against the gate"
# the short forms the tables show beside a tag
SHORT = {FORCED_LABEL: "forced"}


def label_of(event: dict[str, Any]) -> str | None:
    """The label an accept's ``decision`` event carries (forced, or re-gated after a harness
    change), or None for a plain gate accept."""
    if event.get("kind") not in (None, "decision") or event.get("decision") != "accept":
        return None
    if event.get("against_gate"):
        return FORCED_LABEL
    label = event.get("label")
    return label if isinstance(label, str) and label else None


def labelled_accepts(events: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Tag → the label of its accept, for each accept booked with one."""
    found: dict[str, str] = {}
    for event in events:
        if event.get("kind") == "decision" and (label := label_of(event)) is not None:
            found[str(event.get("tag"))] = label
    return found


def short(label: str) -> str:
    """``forced``, or the label's words before its dash (``re-gated after a harness change``)."""
    return SHORT.get(label) or label.split(" — ")[0]
