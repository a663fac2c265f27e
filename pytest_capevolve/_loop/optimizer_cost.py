"""What a hill-climb optimizer says it cost: the JSON lines of its stdout with ``cost_usd``
and/or ``tokens``, e.g. ``{"cost_usd": 0.42, "tokens": 51234}``.

Read after the optimizer exits (crashed or not: what it spent was spent) and booked with the
decision, so ``max_usd`` counts the proposer. The largest line wins: a running total is printed
again at the end. A value that is not a spend (negative, NaN, above 1e6 $) is refused; the
iteration stays unproposed and ``--resume`` runs its optimizer again."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from .._policy.budget.optimizer_spend import SpendRefused, checked_tokens, checked_usd, unbooked_usd
from .._project.spec import Spec
from .._store.rundir import RunDir

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
                with contextlib.suppress(ValueError):  # not JSON: not a cost line
                    value = json.loads(text)
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


def refuse_over_budget(spec: Spec, rundir: RunDir, cid: str, parent: str) -> str | None:
    """The reason (verdict written) when ``cid``'s proposer left its gate no room, else None."""
    from .._policy import guards
    from .._policy.budget.spend import spend_report

    proposer = unbooked_usd(rundir)
    if proposer <= 0:  # nothing spent since the check before the round
        return None
    report = spend_report(spec, rundir, n_siblings=1)
    money = [b["message"] for b in report["afford"]["blockers"] if b["ceiling"] == "max_usd"]
    if report["ceilings"]["max_usd"]["reached"]:
        money.insert(0, f"${report['spent']['total_usd']:.4f} spent reaches max_usd={spec.max_usd:g}")
    if not money:
        return None
    reason = (
        f"never gated: its optimizer reported ${proposer:.4f}, which leaves no room for its val "
        f"evaluation under max_usd ({'; '.join(money)}); the cost is booked, no rollout paid"
    )
    details = {"optimizer_usd": proposer, "blockers": money}
    return guards.record_refusal(
        spec, rundir, guards.BUDGET, cid, parent, decision="indecisive", reason=reason, details=details
    ).reason
