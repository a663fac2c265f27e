"""Which accepts carry a label, read from the log for every view that shows one.

An accept forced against the gate or re-gated after a harness change keeps a label in its
``decision`` event, so neither passes for a plain gate accept."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..log.event_kinds import DECISION

FORCED_LABEL = "forced: accepted against the gate"
# the short forms the tables show beside a tag
SHORT = {FORCED_LABEL: "forced"}


def label_of(event: Mapping[str, object]) -> str | None:
    if event.get("kind") not in (None, DECISION) or event.get("decision") != "accept":
        return None
    if event.get("against_gate"):
        return FORCED_LABEL
    label = event.get("label")
    return label if isinstance(label, str) and label else None


def labelled_accepts(events: Iterable[dict[str, Any]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for event in events:
        if event.get("kind") == DECISION and (label := label_of(event)) is not None:
            found[str(event.get("tag"))] = label
    return found


def short(label: str) -> str:
    return SHORT.get(label) or label.split(" — ")[0]
