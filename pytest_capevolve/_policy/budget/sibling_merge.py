"""Accepted siblings not merged yet: the reminder the design calls "required" before a stop.

Two accepted siblings that fixed disjoint val tasks leave the best with only the later edit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import combinations
from typing import Any

from ..._store.log.event_kinds import DECISION, WORK_CREATED


def unmerged_siblings(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pairs of accepted siblings with disjoint ``fixed`` tasks that no merge combines yet, oldest first."""
    accepted: dict[str, list[Mapping[str, Any]]] = {}
    merged: list[set[str]] = []
    for event in events:
        kind = event.get("kind")
        if kind == DECISION and event.get("decision") == "accept":
            accepted.setdefault(str(event.get("parent")), []).append(event)
        elif kind == WORK_CREATED and event.get("merged_from"):
            merged.append({str(t) for t in event["merged_from"]})
    out = []
    for parent, siblings in accepted.items():
        for a, b in combinations(siblings, 2):
            fixed_a, fixed_b = set(a.get("fixed") or []), set(b.get("fixed") or [])
            tag_a, tag_b = str(a["tag"]), str(b["tag"])
            if not fixed_a or not fixed_b or fixed_a & fixed_b or any({tag_a, tag_b} <= m for m in merged):
                continue
            fixed = {tag_a: sorted(fixed_a), tag_b: sorted(fixed_b)}
            command = f"capevolve merge {tag_a} {tag_b} --tag {tag_a}_{tag_b}"
            out.append({"tags": [tag_a, tag_b], "parent": parent, "fixed": fixed, "command": command})
    return out


def merge_reminder(pairs: list[dict[str, Any]]) -> str:
    if not pairs:
        return ""
    named = "; ".join(f"{' and '.join(p['tags'])} (from {p['parent']!r}): {p['command']}" for p in pairs)
    return (
        f" Before the stop, merge the accepted siblings that fixed disjoint tasks (the best holds only "
        f"the later edit), then gate the merge: {named}."
    )
