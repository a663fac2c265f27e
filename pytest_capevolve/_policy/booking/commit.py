"""Booking decisions: the gate writes evidence (a verdict); a commit books one decision per tag.

``capevolve commit`` and ``--capevolve-commit auto`` book through the same :func:`book`, which then rewrites
the loop's memory for the next proposal: LEDGER.md (a row per decision) and rejected.jsonl (what was
refuted), views of the log's ``decision`` events."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..._engine import confinement
from ..._project.candidate import SEED_TAG, CandidateError, bounded, changed_files, unified_diff
from ..._project.spec import Spec
from ..._project.way_on import commit_command, pasteable
from ..._show.numbers import num
from ..._store.decisions.state_tally import short
from ..._store.log.event_kinds import (
    BEST_CHANGED,
    CANDIDATE_REGISTERED,
    DECISION,
    GROWN,
    SCREEN,
    WORK_CREATED,
    BookedDecision,
    LedgerNumbers,
    Lineage,
)
from ..._store.rundir import RunDir
from .. import guards
from ..budget.optimizer_spend import OptimizerSpend as OptimizerSpend  # checked on construction
from ..repeats.identity import remember_booked
from .adoption import WAY_ON, Adopted, adoption
from .commit_checks import DECISIONS as DECISIONS
from .commit_checks import INDECISIVE as INDECISIVE
from .commit_checks import REJECT_BASES as REJECT_BASES
from .commit_checks import SCREEN_KILL_BASES, Asked, check, check_evidence, refuse_unknown
from .commit_checks import CommitRefused as CommitRefused
from .journal_entry import freeze_entry


def book(
    spec: Spec,
    rundir: RunDir,
    tag: str,
    decision: str,
    *,
    basis: str | None = None,
    note: str = "",
    optimizer: OptimizerSpend | None = None,
    force: bool = False,
) -> BookedDecision:
    """Book ``decision`` for ``tag``; returns it as logged. Raises CommitRefused."""
    optimizer = optimizer or OptimizerSpend()
    with rundir.lock():
        if decision == "accept":  # a best chosen after the test score was seen
            guards.refuse_finalized(rundir, guards.Checkpoint.COMMIT)
        state = rundir.state.read_state()
        best = str(state["best_id"])
        verdict = rundir.verdicts.checked(tag)  # the file as the gate logged it, or refused
        refuse_unknown(rundir, tag, verdict)
        first = _standing_decision(rundir, tag)
        if first is not None and (not force or tag == best):  # a repair would leave the best in place
            flags = ["--reject-basis", basis or "gate"] if decision == "reject" else []
            repair = (  # this run of this project, whatever the newest run or the current folder
                "repair the record with "
                f"`{commit_command(tag, decision, rundir.project_dir, rundir.run_id, *flags, '--force')}`"
                if tag != best
                else pasteable(  # said before the command: after it, "it" read as the new run
                    f"as {tag!r} is the run's best (a repair would leave it so), start a new run "
                    "(`pytest --capevolve-run PROJECT --capevolve-new-run`)",
                    rundir.project_dir,
                )
            )
            raise CommitRefused(
                f"{tag!r} was already decided: {first['decision']} (event seq {first['seq']}); a tag "
                f"is decided once. Evaluate a new version under a new tag, or {repair}"
            )
        adopted = adoption(rundir, verdict, best, spec) if decision == "accept" else None
        asked = Asked(tag, decision, basis, verdict, best, force)
        against_gate = check(spec, rundir, asked, adopted=adopted is not None)
        if not force:
            check_evidence(spec, rundir, asked, adopted=adopted is not None)
        parent = parent_of(rundir, tag, best)
        entry = _entry(rundir, asked, parent, note, optimizer)
        entry["repairs"] = first["seq"] if first is not None else None
        entry["against_gate"] = against_gate
        _label(rundir, entry, verdict, adopted)
        if decision == "reject":  # the change itself: the next proposer reads what was refuted
            entry["diff"] = refuted_diff(rundir, tag, parent, verdict)
        rundir.log.append_event(DECISION, **entry)
        remember_booked(rundir, tag, decision)
        rundir.state.update_state(lambda s: _count(s, entry, optimizer))
        if decision == "accept":
            rundir.log.append_event(BEST_CHANGED, best_id=tag, previous=best)
        refresh(rundir)
    return entry


def _entry(rundir: RunDir, asked: Asked, parent: str, note: str, optimizer: OptimizerSpend) -> BookedDecision:
    tag, decision, basis, verdict, _, force = asked
    merge = merged_from(rundir, tag)
    records = rundir.rollouts.indexed_rollouts("val", [tag])
    lineage: Lineage = {"tag": tag, "parent": parent}
    if merge:
        lineage["merged_from"] = merge
    return {
        **lineage,
        "gated_against": (verdict or {}).get("against"),
        "decision": decision,
        "basis": basis,
        "note": note,
        "forced": force,
        "repairs": None,
        "against_gate": False,
        **(
            _numbers(verdict)
            if verdict is not None or basis not in SCREEN_KILL_BASES
            else _screen_numbers(rundir, tag)
        ),
        "rollouts": len(records),
        "runner_usd": round(sum(r.cost_usd for r in records), 6),
        "changed_files": _changes(rundir, tag, parent, verdict),
        "optimizer_usd": optimizer.usd,
        "optimizer_tokens": optimizer.tokens,
        "optimizer_seconds": optimizer.seconds,
        # what the round wrote, frozen now: a later round's rewrite never passes for it
        "journal_sha256": freeze_entry(rundir, tag),
    }


def _label(
    rundir: RunDir, entry: BookedDecision, verdict: dict[str, Any] | None, adopted: Adopted | None
) -> None:
    """What every view says beside the decision: its label, the shared ledger, who was confined."""
    details = (verdict or {}).get("details") or {}
    label = details.get("harness_changed") or {}
    if entry["decision"] == "accept" and isinstance(label, dict) and isinstance(label.get("label"), str):
        # every view of this best shows it (:func:`..._store.decisions.state_tally.label_of`)
        entry["label"] = label["label"]
    if adopted is not None:  # an earlier run's accept, not gated again: every view says so
        entry["label"] = adopted.label
        seed = [(SEED_TAG, *adopted.seed)] if adopted.seed else []  # what it was accepted against: the seed
        for tag, source, digest in [*seed, (entry["tag"], adopted.snapshot, details.get("content_hash"))]:
            try:  # each copy is what was checked, refused before it is registered
                rundir.snapshots.register_candidate(tag, source, expected=str(digest))
            except CandidateError:
                raise CommitRefused(
                    f"{source} changed while it was adopted: nothing booked; {WAY_ON}"
                ) from None
    ledger = details.get("shared_ledger")
    if isinstance(ledger, dict):  # decided by another project's decision in the shared ledger
        entry["shared_ledger"] = {str(k): str(v) for k, v in ledger.items()}
    said = (verdict or {}).get("confinement") or {}
    entry["confinement"] = {
        "candidate_code": str(said.get("candidate_code") or "not said: no verdict recorded it"),
        "optimizer": confinement.optimizer(),
    }


def _standing_decision(rundir: RunDir, tag: str) -> dict[str, Any] | None:
    """The decision that stands for ``tag``, if any; a provisional or indecisive one stops standing once
    the tag is grown."""
    standing = None
    for event in rundir.log.of_kinds(DECISION, GROWN):
        if event.get("tag") != tag:
            continue
        if event.get("kind") == DECISION and standing is None:
            standing = event
        elif event.get("kind") == GROWN and standing and standing["decision"] in ("provisional", INDECISIVE):
            standing = None
    return standing


def _screen_numbers(rundir: RunDir, tag: str) -> LedgerNumbers:
    kill: Mapping[str, Any] = next(
        (e for e in reversed(rundir.log.of_kinds(SCREEN)) if e.get("tag") == tag), {}
    )
    return {**_numbers(None), "delta_mean": kill.get("delta_mean"), "p_value": kill.get("p_harm")}


def _count(state: dict[str, Any], entry: BookedDecision, optimizer: OptimizerSpend) -> None:
    """Every decision advances ``iterations``; a reject advances ``stall``, an accept resets it."""
    state["iterations"] = int(state["iterations"]) + 1
    if entry["decision"] == "reject":
        state["stall"] = int(state["stall"]) + 1
    elif entry["decision"] == "accept":
        state["stall"] = 0
        state["best_id"] = entry["tag"]
    spent = state["spent"]
    spent["optimizer_usd"] = float(spent.get("optimizer_usd", 0.0)) + optimizer.usd
    spent["optimizer_tokens"] = int(spent.get("optimizer_tokens", 0)) + optimizer.tokens
    spent["optimizer_seconds"] = float(spent.get("optimizer_seconds", 0.0)) + optimizer.seconds


def _numbers(verdict: dict[str, Any] | None) -> LedgerNumbers:
    if verdict is None:
        return {"delta_mean": None, "p_value": None, "bar": None, "fixed": [], "broke": []}
    per_task = verdict.get("per_task", {})
    return {
        "delta_mean": verdict.get("delta_mean"),
        "p_value": verdict.get("p_value"),
        "bar": verdict.get("bar"),
        "verdict": verdict.get("decision"),
        "fixed": sorted(t for t, row in per_task.items() if (row.get("delta") or 0) > 0),
        "broke": sorted(t for t, row in per_task.items() if (row.get("delta") or 0) < 0),
    }


def merged_from(rundir: RunDir, tag: str) -> list[str]:
    """The candidates ``tag`` merges, in the order applied; [] if none."""
    made = next((e for e in rundir.log.events() if e.get("kind") == WORK_CREATED and e.get("tag") == tag), {})
    return [str(t) for t in made.get("merged_from") or []]


def parent_of(rundir: RunDir, tag: str, best: str | None = None) -> str:
    """What ``tag`` was made from: its work copy's parent, else the best when registered, else what its
    verdict was gated against, else the best now (``best``: as the caller read it)."""
    current = None
    for event in rundir.log.events():
        kind = event.get("kind")
        if kind == WORK_CREATED and event.get("tag") == tag:
            return str(event["parent"])
        if kind == BEST_CHANGED:
            current = str(event["best_id"])
        elif kind == CANDIDATE_REGISTERED and event.get("tag") == tag:
            return current or "seed"
    return str((rundir.verdicts.verdict(tag) or {}).get("against") or best or rundir.state.best())


def _changes(rundir: RunDir, tag: str, parent: str, verdict: dict[str, Any] | None) -> list[str]:
    """The files ``tag`` changed against its parent (:func:`compared`)."""
    if (folders := compared(rundir, tag, parent, verdict)) is None:
        return []
    try:
        return changed_files(*folders)
    except CandidateError as exc:  # a symlink leaving the folder (the tamper guard said so too)
        return [f"unreadable: {exc}"]


# What a booked decision changed: the folders compared and, for a reject, the bounded diff logged, so
# ``rejected.jsonl`` tells the next proposer what edit was refuted.
def compared(
    rundir: RunDir, tag: str, parent: str, verdict: dict[str, Any] | None
) -> tuple[Path, Path] | None:
    """``tag``'s folder and its parent's (a screen-refused candidate's source folder stands in)."""
    mine, theirs = rundir.snapshots.snapshot_dir(tag), rundir.snapshots.snapshot_dir(parent)
    if not mine.is_dir():
        source = (verdict or {}).get("details", {}).get("source")
        mine = Path(source) if source else rundir.work_dir(tag)
    if not mine.is_dir() or not theirs.is_dir():
        return None
    return mine, theirs


def refuted_diff(rundir: RunDir, tag: str, parent: str, verdict: dict[str, Any] | None) -> str:
    """The unified diff ``tag`` made against ``parent``, bounded; "" if none."""
    if (folders := compared(rundir, tag, parent, verdict)) is None:
        return ""
    mine, theirs = folders
    try:
        return bounded(unified_diff(theirs, mine, parent, tag))
    except (CandidateError, OSError) as exc:  # a symlink leaving the folder: the tamper guard's
        return f"(no diff: {exc})\n"


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
