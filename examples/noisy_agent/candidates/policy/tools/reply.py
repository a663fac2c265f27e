"""Reply helpers the support agent calls to close a ticket; part of the capability, so a
candidate may change them (and a microcase can check them)."""

from __future__ import annotations

CLOSINGS = {
    "booking": "Your booking change is confirmed.",
    "refund": "Your refund is on its way.",
    "baggage": "Your baggage request is logged.",
    "cancel": "Your cancellation is complete.",
}


def closing_line(category: str) -> str:
    if category not in CLOSINGS:
        raise ValueError(f"unknown ticket category {category!r}")
    return CLOSINGS[category]


def ticket_summary(ticket: str, category: str) -> dict:
    return {"ticket": ticket, "category": category, "closing": closing_line(category)}
