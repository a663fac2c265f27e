"""Booking decisions: the gate writes evidence (a verdict); a commit books one decision per tag.

Used by ``capevolve commit`` (an optimizer or a person deciding) and by a gate session in
``--capevolve-commit auto`` mode (people in CI), through the same :func:`book`. Every decision
is an event in the hash-chained log, moves the counters in ``state.json`` and refreshes the
loop's memory (LEDGER.md, rejected.jsonl). Controller side or the CLI; never on a worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, NotRequired, TypedDict

from .._engine import confinement
from .._policy import Refusal
from .._project.candidate import CandidateError, changed_files, content_hash
from .._project.spec import Spec
from .._store.rundir import RunDir
from . import memory
from .identity import remember_booked
from .journal_entry import freeze_entry
from .optimizer_spend import OptimizerSpend as OptimizerSpend  # checked on construction
from .refuted import compared, refuted_diff

DECISIONS = ("accept", "reject", "inconclusive", "provisional")
# "repeat": bytes the run already holds under another tag, booked unpaid (_policy/identity.py)
REJECT_BASES = ("gate", "screen_kill", "ceiling", "budget", "infra", "micro_test_fail", "repeat")
# A gate session in auto mode also books "indecisive" (tamper, coverage, error imbalance):
# the candidate could not be judged, which is neither an accept nor a reject.
INDECISIVE = "indecisive"
SCREEN_BASES = ("tamper", "leak", "micro_test_fail")


class CommitRefused(Refusal):
    """The decision would corrupt the record; the message says why and what would do."""


class LedgerNumbers(TypedDict):
    """The verdict's numbers a booked decision carries (``verdict``: the gate's own decision,
    when there was a verdict), and per task what the candidate fixed and broke."""

    delta_mean: float | None
    p_value: float | None
    bar: float | None
    verdict: NotRequired[str | None]
    fixed: list[str]
    broke: list[str]


class Lineage(TypedDict):
    """Where a booked tag comes from: its parent, and the candidates it merges (a merge only)."""

    tag: str
    parent: str
    merged_from: NotRequired[list[str]]


class BookedDecision(Lineage):
    """A decision as :func:`book` logs it (the ``decision`` event) and returns it."""

    gated_against: str | None
    decision: str
    basis: str | None
    note: str
    forced: bool
    repairs: int | None
    against_gate: bool
    delta_mean: float | None
    p_value: float | None
    bar: float | None
    verdict: NotRequired[str | None]
    fixed: list[str]
    broke: list[str]
    rollouts: int
    runner_usd: float
    changed_files: list[str]
    diff: NotRequired[str]  # a reject's unified diff against its parent, bounded
    label: NotRequired[str]  # an accept re-gated after a harness change: the label every view shows
    shared_ledger: NotRequired[dict[str, str]]  # repeats another project's decision: project, ledger
    # whether candidate code (as the verdict said) and the optimizer (as this process knows) were
    # confined by the kernel: {"candidate_code": label, "optimizer": label}
    confinement: NotRequired[dict[str, str]]
    optimizer_usd: float
    optimizer_tokens: int
    optimizer_seconds: float
    journal_sha256: str  # the round's journal entry frozen at its first decision (journals/<tag>.md)


class SpentOn(TypedDict):
    """What a tag's val rollouts cost: how many, and the runner's USD."""

    rollouts: int
    runner_usd: float


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
    """Book ``decision`` for ``tag``; returns the decision as logged. Raises CommitRefused."""
    optimizer = optimizer or OptimizerSpend()
    with rundir.lock():
        state = rundir.state.read_state()
        best = str(state["best_id"])
        verdict = rundir.verdicts.checked(tag)  # the file as the gate logged it, or refused
        if tag not in rundir.snapshots.known_tags() and verdict is None:
            if rundir.work_dir(tag).is_dir():
                raise CommitRefused(
                    f"{tag!r} is a work copy with no verdict yet; gate it first: pytest --capevolve-run "
                    f"PROJECT --capevolve-candidate {rundir.work_dir(tag)} --capevolve-gate"
                )
            known = ", ".join(rundir.snapshots.known_tags()) or "none"
            raise CommitRefused(f"unknown tag {tag!r} in run {rundir.run_id} (known: {known})")
        first = _standing_decision(rundir, tag)
        if first is not None and not force:
            raise CommitRefused(
                f"{tag!r} was already decided: {first['decision']} (event seq {first['seq']}); a tag "
                "is decided once. Evaluate a new version under a new tag, or repair the record with "
                f"`capevolve commit {tag} --force`"
            )
        adopted = adoption(rundir, verdict, best, spec.capability_path) if decision == "accept" else None
        against_gate = _check(spec, tag, decision, basis, verdict, best, force, adopted=adopted is not None)
        if decision == "accept" and not force and adopted is None:
            _first_decision_stands(rundir, tag, verdict)
        if basis in SCREEN_KILL_BASES and not force:
            _check_screen_kill(rundir, tag, basis)
        if basis in EVIDENCED_BASES and not force:
            EVIDENCED_BASES[basis](spec, rundir, tag)
        parent = _parent(rundir, tag, best)
        merge = merged_from(rundir, tag)
        lineage: Lineage = {"tag": tag, "parent": parent}
        if merge:
            lineage["merged_from"] = merge
        entry: BookedDecision = {
            **lineage,
            "gated_against": (verdict or {}).get("against"),
            "decision": decision,
            "basis": basis,
            "note": note,
            "forced": force,
            "repairs": first["seq"] if first is not None else None,
            "against_gate": against_gate,
            **(
                _numbers(verdict)
                if verdict is not None or basis not in SCREEN_KILL_BASES
                else _screen_numbers(rundir, tag)
            ),
            **_spent_on(rundir, tag),
            "changed_files": _changes(rundir, tag, parent, verdict),
            "optimizer_usd": optimizer.usd,
            "optimizer_tokens": optimizer.tokens,
            "optimizer_seconds": optimizer.seconds,
            # what the round wrote, frozen now: a later round's rewrite never passes for it
            "journal_sha256": freeze_entry(rundir, tag),
        }
        label = ((verdict or {}).get("details") or {}).get("harness_changed") or {}
        if decision == "accept" and isinstance(label, dict) and isinstance(label.get("label"), str):
            entry["label"] = label["label"]  # every view of this best shows it (:mod:`.._store.forced`)
        if adopted is not None:  # an earlier run's accept, not gated again: every view says so
            entry["label"] = adopted.label
            rundir.snapshots.register_candidate(tag, adopted.snapshot)  # the best needs its snapshot here
        ledger = ((verdict or {}).get("details") or {}).get("shared_ledger")
        if isinstance(ledger, dict):  # decided by another project's decision in the shared ledger
            entry["shared_ledger"] = {str(k): str(v) for k, v in ledger.items()}
        said = (verdict or {}).get("confinement") or {}
        entry["confinement"] = {
            "candidate_code": str(said.get("candidate_code") or "not said: no verdict recorded it"),
            "optimizer": confinement.optimizer(),
        }
        if decision == "reject":  # the change itself: the next proposer reads what was refuted
            entry["diff"] = refuted_diff(rundir, tag, parent, verdict)
        rundir.log.append_event("decision", **entry)
        remember_booked(rundir, tag, decision)
        rundir.state.update_state(lambda s: _count(s, entry, optimizer))
        if decision == "accept":
            rundir.log.append_event("best_changed", best_id=tag, previous=best)
        memory.refresh(rundir)
    return entry


class Adopted(NamedTuple):
    label: str  # what every view of this best shows
    snapshot: Path  # the earlier run's snapshot of the bytes, registered in this run on booking


def adoption(rundir: RunDir, verdict: dict[str, Any] | None, best: str, seed_dir: Path) -> Adopted | None:
    """An accept adopted from an earlier run, or None when the verdict cannot carry
    one: it must be this run's REPEAT verdict of bytes an earlier run of the project accepted,
    and that accept must have been against the same bytes as this run's best. A candidate is its
    bytes: the decision "these bytes beat those" stands, and booking it here moves this run's best
    without paying or spending α again (a new run would otherwise be a dead end: the gate refuses
    to measure a repeat, and commit refused to book it)."""
    details = (verdict or {}).get("details") or {}
    if (verdict or {}).get("decision") != "repeat" or details.get("earlier_decision") != "accept":
        return None
    from .identity import decided_in_project, registered_hashes

    digest = str(details.get("content_hash") or "").removeprefix("sha256:")
    earlier = next(
        (e for d, e in decided_in_project(rundir).items() if d.removeprefix("sha256:") == digest), None
    )
    if earlier is None or earlier.shared is not None or earlier.fresh or earlier.decision != "accept":
        return None
    there = RunDir(rundir.root.parent / earlier.run_id)
    parent = (there.verdicts.verdict(earlier.tag) or {}).get("against")
    theirs, mine = registered_hashes(there).get(str(parent)), registered_hashes(rundir).get(best)
    if mine is None and best == "seed":  # a new run whose first session met only the repeat
        try:
            mine = content_hash(seed_dir)
        except (OSError, CandidateError):
            return None
    if parent is None or theirs is None or theirs != mine:
        return None
    level = f" at {earlier.level}" if earlier.level else ""
    label = f"adopted: accepted against the same bytes as {best!r} in run {earlier.run_id}{level}"
    return Adopted(label + ", not gated again", there.snapshots.snapshot_dir(earlier.tag))


def _first_decision_stands(rundir: RunDir, tag: str, verdict: dict[str, Any] | None) -> None:
    """An accept is booked only on the first decision the gate logged at the tag's level
    against this parent (its ``gate_decision``): a round gated again is judged at the level its
    slot had (issue 25), so a verdict that reads otherwise was judged on evidence paid since
    (infra-error rollouts paid again) — a second look at one level, not a decision. A grown
    verdict (look > 1) is a second look at its own, smaller level, and is not held to it."""
    looks = ((verdict or {}).get("details") or {}).get("looks") or {}
    if verdict is None or int(looks.get("look", 1)) > 1:
        return
    against = verdict.get("against")
    first = next(
        (
            e
            for e in rundir.log.of_kinds("gate_decision")
            if e.get("tag") == tag and e.get("against") == against
        ),
        None,
    )
    if first is not None and first.get("decision") != "accept":
        raise CommitRefused(
            f"the gate decided {tag!r} {first.get('decision')} against {against!r} at its level (decision "
            f"j = {first.get('j')}, gate_decision seq {first.get('seq')}); the verdict gated since on "
            "evidence paid after it is a second look at that level, not a new decision — evaluate a new "
            "version under a new tag"
        )


def _check(
    spec: Spec,
    tag: str,
    decision: str,
    basis: str | None,
    verdict: dict[str, Any] | None,
    best: str,
    force: bool,
    *,
    adopted: bool = False,
) -> bool:
    """Refuse what the record cannot support; returns whether an accept goes against the gate.
    ``adopted``: the accept repeats one an earlier run of the project booked against the same
    parent bytes (:func:`adoption`), so no verdict of this run is needed."""
    if decision not in (*DECISIONS, INDECISIVE):
        raise CommitRefused(f"decision {decision!r} is not one of {', '.join(DECISIONS)}")
    if decision == "accept":
        if basis is not None:
            raise CommitRefused("--reject-basis goes with a reject, not an accept")
        if tag == best:
            raise CommitRefused(f"{tag!r} is already the best")
        if adopted:
            return False
        if verdict is not None and verdict.get("decision") == "repeat":
            raise CommitRefused(
                f"{tag!r} repeats bytes already decided ({verdict.get('reason')}); only an accept an "
                f"earlier run booked against the bytes of this run's best {best!r} can be adopted here, and "
                "this one was not: change its bytes and gate the new version"
            )
        full = verdict is not None and verdict.get("n_tasks", 0) > 0
        if verdict is not None and not full and verdict.get("against") == best:
            # gated against the best, but never scored (a repeat, a leak, a tamper, a microcase):
            # gating the same bytes again says the same, so "gate it" would be no way on
            raise CommitRefused(
                f"accepting {tag!r} needs a full-val verdict against the current best {best!r}; its "
                f"verdict scored no val task ({verdict.get('decision')}: {verdict.get('reason')}). Book "
                f"what it decided (capevolve commit {tag} --decision reject --reject-basis gate), or "
                "change the bytes and gate them under a new tag"
            )
        if not full or verdict is None or verdict.get("against") != best:
            seen = "no verdict" if verdict is None else f"a verdict against {verdict.get('against')!r}"
            raise CommitRefused(
                f"accepting {tag!r} needs a full-val verdict against the current best {best!r}; there is "
                f"{seen}. Gate it: capevolve pytest --capevolve-run PROJECT --capevolve-candidate DIR "
                "--capevolve-gate"
            )
        paired = float(verdict.get("coverage", {}).get("paired", 0.0))
        if paired < spec.min_coverage:
            raise CommitRefused(
                f"tag {tag!r}: its verdict covers {paired:.0%} of val, below min_coverage "
                f"{spec.min_coverage:.0%}"
            )
        if verdict.get("decision") != "accept":
            if not force:
                raise CommitRefused(
                    f"the gate did not accept {tag!r} ({verdict.get('decision')}: {verdict.get('reason')}); "
                    "accepting against the gate needs --force, and the record will say so"
                )
            return True
        return False
    if decision == "reject":
        if basis not in REJECT_BASES:
            raise CommitRefused(f"a reject needs --reject-basis, one of {', '.join(REJECT_BASES)}")
    elif basis is not None and decision != INDECISIVE:
        raise CommitRefused(f"--reject-basis goes with a reject, not {decision!r}")
    grown = int((verdict or {}).get("details", {}).get("looks", {}).get("look", 1)) > 1
    if decision == "inconclusive" and not force and not grown:
        raise CommitRefused(
            f"{tag!r} cannot be booked inconclusive before it has been grown (more trials); "
            "--force to book it now"
        )
    if decision == "provisional" and not force:
        delta = (verdict or {}).get("delta_mean")
        if verdict is None or verdict.get("decision") == "accept" or not (delta or 0) > 0:
            has = (
                "no verdict"
                if verdict is None
                else f"Δ̄ = {'—' if delta is None else format(delta, '+.4f')} and a verdict of "
                f"{verdict.get('decision')}"
            )
            raise CommitRefused(f"provisional is for a verdict with Δ̄ > 0 under the bar; {tag!r} has {has}")
    return False


# A screen kill is booked as a reject under the basis its kill rests on (_decide/screen.py).
SCREEN_KILL_BASES = {"screen_kill": "harm", "ceiling": "ceiling"}


def _standing_decision(rundir: RunDir, tag: str) -> dict[str, Any] | None:
    """The decision that stands for ``tag``, if any. A provisional or indecisive decision
    stops standing once the tag is grown after it (a grow is the next look; its verdict gets
    its own decision)."""
    standing = None
    for event in rundir.log.events():
        if event.get("tag") != tag:
            continue
        if event.get("kind") == "decision" and standing is None:
            standing = event
        elif event.get("kind") == "grown" and standing is not None:
            if standing["decision"] in ("provisional", INDECISIVE):
                standing = None
    return standing


def _screen_numbers(rundir: RunDir, tag: str) -> LedgerNumbers:
    """A screen kill's numbers for the ledger (Δ̄ and the harm test's p on the subset)."""
    kill: dict[str, Any] = next(
        (e for e in reversed(rundir.log.events()) if e.get("kind") == "screen" and e.get("tag") == tag),
        {},
    )
    return {**_numbers(None), "delta_mean": kill.get("delta_mean"), "p_value": kill.get("p_harm")}


def _check_screen_kill(rundir: RunDir, tag: str, basis: str) -> None:
    """A reject on basis ``screen_kill`` or ``ceiling`` needs a screen that killed ``tag`` on
    that ground (``screens/<tag>__*.json``)."""
    wanted = SCREEN_KILL_BASES[basis]
    kills = [
        e
        for e in rundir.log.events()
        if e.get("kind") == "screen" and e.get("tag") == tag and e.get("decision") == "kill"
    ]
    if not any(e.get("basis") == wanted for e in kills):
        found = ", ".join(f"{e.get('basis')}" for e in kills) or "none"
        raise CommitRefused(
            f"--reject-basis {basis} needs a screen that killed {tag!r} on {wanted}; its screen kills: "
            f"{found}. Screen it (pytest --capevolve-run PROJECT --capevolve-candidate DIR "
            "--capevolve-screen 1) or give the basis the record supports"
        )


def _check_infra(spec: Spec, rundir: RunDir, tag: str) -> None:
    """A reject on basis ``infra`` needs the log to record an infra error of one of ``tag``'s
    rollouts (train or val): a candidate that never lost a rollout was not rejected for infra."""
    rollouts = [e for e in rundir.log.of_kinds("rollout") if e.get("tag") == tag and e.get("split") != "test"]
    errors = sum(1 for e in rollouts if e.get("infra_error"))
    if errors == 0:
        raise CommitRefused(
            f"--reject-basis infra needs an infra error in the log; the {len(rollouts)} logged rollout(s) "
            f"of {tag!r} have none: give the basis the record supports (gate, after a gate session)"
        )


def _check_budget(spec: Spec, rundir: RunDir, tag: str) -> None:
    """A reject on basis ``budget`` needs the run's ceilings to leave no room for one more
    full-val evaluation (what ``capevolve spend`` says): while one fits, the candidate could be
    gated, and rejecting it is a choice, not the budget's."""
    from .spend import spend_report  # here: the spend report reads the whole run

    report = spend_report(spec, rundir, n_siblings=1)
    if report["budget_exhausted"] or not report["afford"]["affordable"]:
        return
    raise CommitRefused(
        f"--reject-basis budget needs the ceilings to leave no room for one more evaluation; "
        f"capevolve spend says one fits ({report['afford']['rollouts_needed']} rollouts under every "
        f"ceiling): gate {tag!r}, or give the basis the record supports"
    )


# Reject bases whose evidence is in the record; booked only when it is there (or with --force).
EVIDENCED_BASES = {"infra": _check_infra, "budget": _check_budget}


def _count(state: dict[str, Any], entry: BookedDecision, optimizer: OptimizerSpend) -> None:
    """Every decision advances ``iterations``; a reject advances ``stall`` and an accept resets
    it (and moves the best); indecisive, inconclusive and provisional leave ``stall`` alone."""
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
    """The verdict's numbers the ledger shows, and per task what the candidate fixed and broke."""
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


def parent_of(rundir: RunDir, tag: str) -> str:
    """What ``tag`` was made from (see :func:`_parent`), for readers outside a booking."""
    return _parent(rundir, tag, rundir.state.best())


def merged_from(rundir: RunDir, tag: str) -> list[str]:
    """The candidates ``tag`` merges (``capevolve merge``), in the order applied; [] if none."""
    for event in rundir.log.events():
        if event.get("kind") == "work_created" and event.get("tag") == tag:
            return [str(t) for t in event.get("merged_from") or []]
    return []


def _parent(rundir: RunDir, tag: str, best: str) -> str:
    """What ``tag`` was made from: its work copy's parent, else the best when it was first
    registered (a sibling re-gated in a round against an earlier sibling still had the round's
    best as its parent), else what its verdict was gated against (a candidate refused before it
    was registered: a microcase it failed), else the best now."""
    current = None
    for event in rundir.log.events():
        kind = event.get("kind")
        if kind == "work_created" and event.get("tag") == tag:
            return str(event["parent"])
        if kind == "best_changed":
            current = str(event["best_id"])
        elif kind == "candidate_registered" and event.get("tag") == tag:
            return current or "seed"
    return str((rundir.verdicts.verdict(tag) or {}).get("against") or best)


def _spent_on(rundir: RunDir, tag: str) -> SpentOn:
    records = rundir.rollouts.indexed_rollouts("val", [tag])
    return {"rollouts": len(records), "runner_usd": round(sum(r.cost_usd for r in records), 6)}


def _changes(rundir: RunDir, tag: str, parent: str, verdict: dict[str, Any] | None) -> list[str]:
    """The files ``tag`` changed against its parent, from their snapshots (a candidate refused
    by a screen has none: its source folder, recorded in the verdict, stands in)."""
    folders = compared(rundir, tag, parent, verdict)
    if folders is None:
        return []
    mine, theirs = folders
    try:
        return changed_files(mine, theirs)
    except CandidateError as exc:  # a symlink leaving the folder (the tamper guard said so too)
        return [f"unreadable: {exc}"]
