"""Which accepts were forced against the gate, read from the log for every view that shows one.

``capevolve commit TAG --decision accept --force`` books an accept the gate did not give: the
record keeps it (a decision is the optimizer's, the verdict is the evidence), but a best chosen
that way is not a measured improvement. Only LEDGER.md used to say so; a rejected no-op became
the best in ``measure``, report.md, ``capevolve runs``, the finalize summary and the dashboard
with nothing to tell it from a gate accept. Each of them asks :func:`forced_accepts` and shows
:data:`FORCED_LABEL` beside the tag.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FORCED_LABEL = "forced: accepted against the gate"


def forced_accepts(events: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tag → its ``decision`` event, for each accept booked against the gate (``--force``)."""
    return {
        str(e.get("tag")): e
        for e in events
        if e.get("kind") == "decision" and e.get("decision") == "accept" and e.get("against_gate")
    }


def labelled(tag: str, forced: dict[str, dict[str, Any]]) -> str:
    """``tag``, or ``tag (forced: accepted against the gate)``."""
    return f"{tag} ({FORCED_LABEL})" if tag in forced else tag
