"""What a decided hill-climb iteration books and says: the decision from its verdict, the
one-line message (the store's commit message and the log line), the ``outcome.json`` record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._decide.basis import Basis
from .._policy.booking.commit import INDECISIVE, CommitRefused, OptimizerSpend, book
from .._project.spec import Spec
from .._store.files import read_json
from .._store.log.event_kinds import HILL_CLIMB_ITERATION
from .._store.rundir import RunDir
from .journal import proposed_event

SUMMARY_KEYS = ("tag", "decision", "basis", "delta_mean", "p_value", "optimizer")


def booked_decision(verdict: dict[str, Any]) -> tuple[str, str | None]:
    """The decision and basis :func:`.commit.book` records for a gate verdict."""
    decision = verdict.get("decision")
    if decision == "accept":
        return "accept", None
    if decision == "reject":
        basis = verdict.get("basis")
        return "reject", basis if basis in (Basis.MICRO_TEST_FAIL, Basis.REPEAT) else Basis.GATE
    return INDECISIVE, verdict.get("basis")


def booked_reason(verdict: dict[str, Any], booked: str) -> str:
    """The verdict's reason as the iteration's booking says it (a repeat of accepted bytes is
    booked here, unlike in a gate session)."""
    reason = str(verdict.get("reason", "")).strip()
    details = verdict.get("details") or {}
    if verdict.get("basis") != Basis.REPEAT or details.get("earlier_decision") != "accept":
        return reason
    level = details.get("earlier_level")
    return (
        f"never paid for: byte-identical to {details.get('repeats')!r} (accepted"
        f"{f' at {level}' if level else ''}); that accept stands, and this iteration is booked "
        f"{booked} (repeat) so the loop counts it and its proposer's spend: the proposal brought "
        "nothing new (change the bytes)"
    )


# what the optimizer reported, logged when its proposal is complete and booked from the log
PROPOSAL_SPEND = ("cost_usd", "tokens", "seconds")


def book_iteration(spec: Spec, rundir: RunDir, cid: str, meta: dict[str, Any], folder: Path) -> None:
    """Book the gate's verdict on ``cid`` through :func:`.commit.book`, with the optimizer's
    cost from the log's ``proposed`` event (``optimizer.json`` for older runs); a booking a
    kill cut off after it was written is not booked again."""
    verdict = rundir.verdicts.verdict(cid) or {}
    booked, basis = booked_decision(verdict)
    proposed = proposed_event(rundir, cid).items()  # the optimizer's spend as logged ({} in older runs)
    optimizer = {**read_json(folder / "optimizer.json"), **{k: v for k, v in proposed if k in PROPOSAL_SPEND}}
    head = f"hill-climb iter {meta['iteration']} ({meta['focus_mode']}; optimizer {optimizer['outcome']})"
    get = optimizer.get
    spend = OptimizerSpend(get("cost_usd", 0.0), get("tokens", 0), get("seconds", 0.0))
    note = f"{head}: {booked_reason(verdict, booked)}"
    try:
        book(spec, rundir, cid, booked, basis=basis, note=note, optimizer=spend)
    except CommitRefused:
        if not any(d["tag"] == cid for d in rundir.decisions()):
            raise


def outcome_message(meta: dict[str, Any], cid: str, entry: dict[str, Any], reason: str) -> str:
    """``iter N: ACCEPT cand_0003 vs seed (Δ̄=+0.1000, p=0.01) — basis: reason``."""
    word = {"accept": "ACCEPT"}.get(entry["decision"], entry["decision"])
    delta, p = entry.get("delta_mean"), entry.get("p_value")
    parts = [] if delta is None else [f"Δ̄={round(delta, 4) + 0.0:+.4f}"]  # never "-0.0000"
    parts += [] if p is None else [f"p={p:.4g}"]
    numbers = ", ".join(parts)
    message = f"iter {meta['iteration']}: {word} {cid} vs {entry.get('parent')}"
    message += f" ({numbers})" if numbers else ""
    message += f" — {entry.get('basis')}" if entry.get("basis") else ""
    message += f": {reason}" if reason else ""
    return message


def outcome_record(
    meta: dict[str, Any],
    cid: str,
    entry: dict[str, Any],
    *,
    reason: str,
    optimizer: str | None,
    store: str,
    store_ref: Any,
    message: str,
) -> dict[str, Any]:
    """The iteration's ``outcome.json``: its decision as booked, its focus, its store entry."""
    return {
        "iteration": meta["iteration"],
        "tag": cid,
        "parent": entry.get("parent"),
        "decision": entry["decision"],
        "basis": entry.get("basis"),
        "delta_mean": entry.get("delta_mean"),
        "p_value": entry.get("p_value"),
        "reason": reason,
        "changed_files": entry.get("changed_files", []),
        "focus": meta.get("focus", []),
        "optimizer": optimizer,
        "store": store,
        "store_ref": store_ref,
        "message": message,
    }


def summary_rows(rundir: RunDir, cids: list[str]) -> list[dict[str, Any]]:
    """One row of ``summary.json`` per decided iteration, from the log (not ``outcome.json``)."""
    standing: dict[str, dict[str, Any]] = {}
    for event in rundir.decisions():
        standing[str(event["tag"])] = event
    proposed = {
        str(e.get("tag")): e.get("optimizer")
        for e in rundir.log.of_kinds(HILL_CLIMB_ITERATION)
        if e.get("phase") == "proposed"
    }
    rows = []
    for cid in cids:
        entry = standing.get(cid)
        if entry is not None:
            rows.append({**{k: entry.get(k) for k in SUMMARY_KEYS[:-1]}, "optimizer": proposed.get(cid)})
    return rows
