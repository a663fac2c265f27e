"""The loop's memory: LEDGER.md (a row per decision) and rejected.jsonl (what was refuted).

Views of the log's ``decision`` events, rewritten whole after every decision, for the next proposal."""

from __future__ import annotations

import unicodedata
from typing import Any

from ..._show.numbers import num
from ..._store.decisions.state_tally import short
from ..._store.rundir import RunDir

LEDGER_COLUMNS = (
    "tag", "parent", "decision", "basis", "Δ̄", "p", "bar", "rollouts", "$ runner", "$ optimizer", "note",
)  # fmt: skip


def refresh(rundir: RunDir) -> None:
    decisions = rundir.decisions()
    rundir.write_memory(render_ledger(rundir.run_id, decisions), render_rejected(decisions))


def ledger_row(entry: dict[str, Any]) -> list[str]:
    decision = entry["decision"]
    if entry.get("against_gate"):
        decision += " (accepted against the gate)"
    elif isinstance(entry.get("label"), str) and entry.get("decision") == "accept":
        decision += f" ({short(entry['label'])})"
    if isinstance(entry.get("shared_ledger"), dict):  # another project's decision, through the ledger
        decision += f" (shared ledger: the project at {entry['shared_ledger'].get('project')})"
    if entry.get("repairs") is not None:
        decision += f" (repairs event {entry['repairs']})"
    parent = str(entry.get("parent") or "—")
    if entry.get("merged_from"):  # a merge: its parents, onto their common parent
        parent = f"{' + '.join(entry['merged_from'])} (merged onto {parent})"
    against = entry.get("gated_against")
    if against and against != entry.get("parent"):  # re-gated after the round's accept: Δ̄, p are vs it
        parent += f" (gated against {against})"
    return [
        entry["tag"],
        parent,
        decision,
        entry.get("basis") or "",
        num(entry.get("delta_mean"), "+.4f"),
        num(entry.get("p_value"), ".4g"),
        num(entry.get("bar"), ".4f"),
        str(entry.get("rollouts", 0)),
        f"{entry.get('runner_usd', 0.0):.4f}",
        f"{entry.get('optimizer_usd', 0.0):.4f}",
        cell(str(entry.get("note") or "")),
    ]


def cell(text: str) -> str:
    """``text`` fit for one table cell: ``|`` escaped, every line break or control character a space (a
    note that broke its row would add a forged one)."""
    flat = "".join(" " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch for ch in text)
    return flat.replace("|", "\\|")


def render_ledger(run_id: str, decisions: list[dict[str, Any]]) -> str:
    lines = [
        f"# Ledger — run {run_id}",
        "",
        "One row per decision, in the order booked (from the `decision` events of events.jsonl).",
        "",
        "| " + " | ".join(LEDGER_COLUMNS) + " |",
        "|" + "---|" * len(LEDGER_COLUMNS),
    ]
    lines += ["| " + " | ".join(ledger_row(e)) + " |" for e in decisions]
    return "\n".join(lines) + "\n"


def render_rejected(decisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = (
        "tag", "parent", "gated_against", "note", "basis", "changed_files", "diff", "fixed", "broke",
        "delta_mean", "p_value", "bar",
    )  # fmt: skip
    return [
        {k: e.get(k) for k in keys} | ({"merged_from": e["merged_from"]} if e.get("merged_from") else {})
        for e in decisions
        if e["decision"] == "reject"
    ]
