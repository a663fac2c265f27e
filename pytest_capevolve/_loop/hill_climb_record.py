"""What a ``capevolve hill-climb`` iteration books and leaves: the decision from its verdict, its
one-line message, its ``outcome.json``, its commit in the candidate store (:mod:`.git_store`)
carrying the log's head (kept off the run dir, :mod:`.._store.log.event_chain`), its row of
``summary.json``; and the verdict of an output refused before its gate pays: a change to a
``--protected-paths`` glob (indecisive, ``tamper``), bytes the run already holds (a candidate is
its bytes, :mod:`.._policy.repeats.identity`: ``reject``, ``repeat``, naming what it repeats, a
failed optimizer's copy of the parent too), a proposer whose cost leaves its gate no room under
``max_usd``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._decide.basis import Basis
from .._policy import guards
from .._policy.booking.adoption import adoption
from .._policy.booking.commit import INDECISIVE, CommitRefused, OptimizerSpend, book
from .._policy.budget.optimizer_spend import unbooked_usd
from .._policy.budget.spend import spend_report
from .._policy.repeats.identity import earlier_with_bytes, repeat_line
from .._project.candidate import SEED_TAG, CandidateError, content_hash
from .._project.harness import protected_digests, tampered
from .._project.spec import Spec
from .._store.files import atomic_write_json, read_json
from .._store.log.event_chain import head
from .._store.rundir import RunDir
from .git_store import CandidateStore, StoreError
from .journal import numbers, proposals, proposed_event

SUMMARY_KEYS = ("tag", "decision", "basis", "delta_mean", "p_value", "label")  # and the optimizer's outcome


def booked_decision(verdict: dict[str, Any]) -> tuple[str, str | None]:
    """The decision and basis :func:`.commit.book` records for a gate verdict."""
    decision = verdict.get("decision")
    if decision == "accept":
        return "accept", None
    if decision == "reject":
        basis = verdict.get("basis")
        return "reject", basis if basis in (Basis.MICRO_TEST_FAIL, Basis.REPEAT) else Basis.GATE
    return INDECISIVE, verdict.get("basis")


def booked_reason(verdict: dict[str, Any], booked: str, not_adopted: str = "") -> str:
    """The verdict's reason as the iteration's booking says it (a repeat of accepted bytes is booked
    here, unlike in a gate session): adopted, or why not and the way on."""
    details = verdict.get("details") or {}
    if verdict.get("basis") != Basis.REPEAT or details.get("earlier_decision") != "accept":
        return str(verdict.get("reason", "")).strip()
    level = f" at {details['earlier_level']}" if details.get("earlier_level") else ""
    said = f"never paid for: byte-identical to {details.get('repeats')!r} (accepted{level})"
    if booked == "accept":
        return (
            f"{said} in an earlier run against the same bytes as this run's best: adopted as this run's "
            "best, labelled, not gated again; its val rollouts are paid once here, now"
        )
    why = f", not adopted: {not_adopted}. This" if not_adopted else "; that accept stands, and this"
    return (
        f"{said}{why} iteration, which brought nothing new (change the bytes), is booked {booked} (repeat) "
        "so the loop counts it and its proposer's spend"
    )


# what the optimizer reported, logged when its proposal is complete and booked from the log
PROPOSAL_SPEND = ("cost_usd", "tokens", "seconds")


def book_iteration(spec: Spec, rundir: RunDir, cid: str, meta: dict[str, Any], folder: Path) -> None:
    """Book the gate's verdict on ``cid`` through :func:`.commit.book`, with the optimizer's
    cost from the log's ``proposed`` event; a booking a
    kill cut off after it was written is not booked again."""
    verdict = rundir.verdicts.verdict(cid) or {}
    booked, basis = booked_decision(verdict)
    not_adopted = ""
    try:  # another run's accept, adopted as commit adopts it: booked as a repeat, the best stayed behind
        if adoption(rundir, verdict, rundir.state.best(), spec) is not None:
            booked, basis = "accept", None
    except CommitRefused as exc:
        not_adopted = str(exc)
    outcome = read_json(folder / "optimizer.json")["outcome"]
    head = f"hill-climb iter {meta['iteration']} ({meta['focus_mode']}; optimizer {outcome})"
    get = proposed_event(rundir, cid).get  # the optimizer's spend as logged, never as a file says
    spend = OptimizerSpend(get("cost_usd", 0.0), get("tokens", 0), get("seconds", 0.0))
    note = f"{head}: {booked_reason(verdict, booked, not_adopted)}"
    try:
        book(spec, rundir, cid, booked, basis=basis, note=note, optimizer=spend)
    except CommitRefused:
        if not any(d["tag"] == cid for d in rundir.decisions()):
            raise


def outcome_message(meta: dict[str, Any], cid: str, entry: dict[str, Any], reason: str) -> str:
    """``iter N: ACCEPT cand_0003 vs seed (Δ̄=+0.1000, p=0.01) — basis: reason``."""
    word = {"accept": "ACCEPT"}.get(entry["decision"], entry["decision"])
    message = f"iter {meta['iteration']}: {word} {cid} vs {entry.get('parent')}{numbers(entry)}"
    message += f" — {entry.get('basis')}" if entry.get("basis") else ""
    message += f": {reason}" if reason else ""
    return message


def summary_rows(rundir: RunDir, cids: list[str]) -> list[dict[str, Any]]:
    """One row of ``summary.json`` per decided iteration, from the log (not ``outcome.json``)."""
    standing = {str(event["tag"]): event for event in rundir.decisions()}
    proposed = {str(e.get("tag")): e.get("optimizer") for e in proposals(rundir)}
    return [
        {**{k: standing[cid].get(k) for k in SUMMARY_KEYS}, "optimizer": proposed.get(cid)}
        for cid in cids
        if cid in standing
    ]


class LoopIncomplete(Exception):
    """An evaluation did not complete (no verdict); ``--resume`` continues it."""


def finish(
    store: CandidateStore,
    store_kind: str,
    rundir: RunDir,
    cid: str,
    entry: dict[str, Any],
    log: Callable[[str], object],
) -> None:
    """The outcome file and the store's commit of ``cid``, whose booked decision is ``entry``."""
    folder = rundir.hill_climb_dir(cid)
    meta = dict(read_json(folder / "iteration.json"))
    verdict = rundir.verdicts.verdict(cid) or {}
    reason = str(entry.get("note") or "").partition(": ")[2] or booked_reason(verdict, str(entry["decision"]))
    message = outcome_message(meta, cid, entry, reason)
    snapshot = rundir.snapshots.snapshot_dir(cid)
    files = snapshot if snapshot.is_dir() else rundir.work_dir(cid)
    anchored = f"{message}\n\n{head(rundir.log).trailer()}"  # the log's head, kept off the run dir
    ref = record(store, store_kind, cid, files, anchored, accepted=entry["decision"] == "accept")
    if (folder / "outcome.json").is_file():
        return
    optimizer = folder / "optimizer.json"
    outcome = {  # the decision as booked, its focus, its store entry
        "iteration": meta["iteration"],
        "tag": cid,
        **{key: entry.get(key) for key in ("parent", "decision", "basis", "delta_mean", "p_value")},
        "reason": reason,
        "changed_files": entry.get("changed_files", []),
        "focus": meta.get("focus", []),
        "optimizer": read_json(optimizer).get("outcome") if optimizer.is_file() else None,
        "store": store_kind,
        "store_ref": ref,
        "message": message,
    }
    atomic_write_json(folder / "outcome.json", outcome)
    log(message)


def store_seed(store: CandidateStore, store_kind: str, rundir: RunDir, capability_path: Path) -> None:
    """The seed's commit, once: its snapshot, or the capability itself before there is one."""
    if store.holds(SEED_TAG):
        return
    snapshot = rundir.snapshots.snapshot_dir(SEED_TAG)
    files = snapshot if snapshot.is_dir() else capability_path
    message = f"iter 0: seed (the baseline)\n\n{head(rundir.log).trailer()}"
    record(store, store_kind, SEED_TAG, files, message, accepted=True)


def record(
    store: CandidateStore, store_kind: str, tag: str, files: Path, message: str, *, accepted: bool
) -> Any:
    """Hand one candidate to the store; a failing store stops the loop in one line (the decision
    is booked; the next hill-climb records it)."""
    try:
        return store.record(tag, files, message, accepted=accepted)
    except (StoreError, OSError) as exc:
        raise LoopIncomplete(
            f"the {store_kind} store did not record {tag}: {exc}; its decision is booked, "
            "and capevolve hill-climb records it once the store works"
        ) from None


def refuse_extra_tamper(
    spec: Spec, rundir: RunDir, cid: str, parent: str, workdir: Path, extra_protected: tuple[str, ...]
) -> bool:
    """True (and the tamper verdict written) when ``workdir`` changes the seed's ``extra_protected`` paths."""
    try:
        digests = protected_digests(spec.capability_path, extra_protected)
        changes = tampered(digests, workdir, extra_protected)
    except CandidateError as exc:
        changes = [str(exc)]
    if not changes:
        return False
    details: dict[str, Any] = {
        "changed_paths": changes,
        "protected_paths": list(extra_protected),
        "source": str(workdir),
    }
    reason = f"never scored: it changes a path --protected-paths protects ({'; '.join(changes[:5])})"
    guards.record_refusal(
        spec, rundir, guards.TAMPER, cid, parent, decision="indecisive", reason=reason, details=details
    )
    return True


def refuse_repeat_unpaid(spec: Spec, rundir: RunDir, cid: str, parent: str, workdir: Path) -> bool:
    """True (and the repeat's verdict written) when ``workdir`` holds bytes the run already holds."""
    try:
        digest = content_hash(workdir)
    except CandidateError:  # what cannot be hashed (a FIFO, a loop): the session's tamper screen
        return False
    earlier = earlier_with_bytes(rundir, digest, besides=cid)
    if earlier is None:
        return False
    best = rundir.state.best()
    line = repeat_line(cid, digest, earlier, best=best)
    if earlier.decision == "accept" and earlier.tag != best:  # booked here, unlike a gate's repeat
        line = (
            f"candidate {cid!r} is byte-identical to {earlier.tag!r} ({earlier.accepted_at()}) in "
            f"{earlier.where()}: that accept stands, and this proposal, which brings nothing new, "
            "is booked reject (repeat)"
        )
    guards.record_refusal(
        spec,
        rundir,
        guards.REPEAT,
        cid,
        parent,
        decision="reject",
        reason=f"never paid for: {line}",
        details={
            "repeats": earlier.tag,
            "content_hash": digest,
            "earlier_decision": earlier.decision,
            "earlier_level": earlier.level,
        },
    )
    return True


def refuse_over_budget(spec: Spec, rundir: RunDir, cid: str, parent: str) -> str | None:
    """The reason (verdict written) when ``cid``'s proposer left its gate no room, else None."""
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
