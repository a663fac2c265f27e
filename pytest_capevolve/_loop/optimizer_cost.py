"""What a hill-climb optimizer says it cost: the last JSON line of its stdout with ``cost_usd``
and/or ``tokens``, e.g. ``{"cost_usd": 0.42, "tokens": 51234}``.

Used by :mod:`.optimizer_run` once per iteration, after the optimizer exits (a crashed or
timed-out one too: what it spent before it died was spent). The dollars and tokens are booked
with the iteration's decision (:func:`.iteration_outcome.book_iteration`), so ``max_usd`` counts
the proposer beside the rollouts. The largest such line wins (dollars and tokens each): an agent
reporting a running total prints it again at the end, and summing would count it twice — and a
later, smaller line (a second report printed to undercut the first) never lowers what the first
said was spent. A value that is not a spend
(negative, NaN, above 1e6 $) is refused in one line — the iteration then stays unproposed, and
``--resume`` runs its optimizer again — never booked and never read as 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .._policy.optimizer_spend import SpendRefused, checked_tokens, checked_usd

COST_KEYS = ("cost_usd", "tokens")


def reported_cost(stdout: Path) -> dict[str, Any]:
    """``{"cost_usd": float, "tokens": int, "cost_line": N}`` from the optimizer's stdout, or
    ``{}`` when it printed no cost line; raises SpendRefused naming the file and line."""
    found: list[tuple[int, dict[str, Any]]] = []
    try:
        with stdout.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                text = line.strip()
                if not (text.startswith("{") and text.endswith("}")):
                    continue
                try:
                    value = json.loads(text)
                except ValueError:
                    continue
                if isinstance(value, dict) and any(k in value for k in COST_KEYS):
                    found.append((number, value))
    except FileNotFoundError:
        return {}
    if not found:
        return {}
    usd: tuple[float, int] = (0.0, found[-1][0])
    tokens = 0
    for number, value in found:  # every line checked: a refused value anywhere is refused
        where = f"{stdout} line {number} (the optimizer's cost report)"
        try:
            line_usd = checked_usd(value.get("cost_usd", 0.0), where, "cost_usd")
            tokens = max(tokens, checked_tokens(value.get("tokens", 0), where, "tokens"))
        except SpendRefused as exc:
            raise SpendRefused(
                f"{exc}; nothing was booked: fix the optimizer's report, then --resume"
            ) from None
        if line_usd > usd[0]:
            usd = (line_usd, number)
    return {"cost_usd": usd[0], "tokens": tokens, "cost_line": usd[1]}
