"""A candidate is its bytes: the tag is a name, the content hash is the candidate.

Bytes already decided are never paid for again under another tag: refused before anything is paid, naming
the earlier tag, its decision and its level (refusing rather than re-judging cannot be got wrong by a later
change to how families are formed). Null controls and a ``--capevolve-rerun`` of undecided bytes are not.
Text that differs from a decided tag's only in line endings or trailing whitespace is the same candidate
(only decided tags and the best are compared: undecided bytes have no decision to launder). The first
decision stands: a gate asked for a decided tag re-derives it at its level and pays and writes nothing.
Each booked decision is also remembered outside any one run folder, in ``.capevolve/decisions.jsonl``
(bytes, val tasks by id and content key, tag, run, decision, level, harness), so moving a run folder out
does not let refuted bytes be gated afresh; other projects are reached only through a shared ledger."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..._decide.alpha_budget import shown_decision
from ..._decide.verdict import Verdict
from ..._project.candidate import CandidateError, content_hash, null_control_of, text_hash
from ..._store.files import RunDirError
from ..._store.log.event_kinds import CANDIDATE_REGISTERED, DECISION, VERDICT
from ..._store.memory import project_memory, shared_ledger, task_keys
from ..._store.memory.task_keys import Tasks
from ..._store.rundir import RUNS_DIR, RunDir

# The verdict of bytes already *accepted*, gated again under a new tag or in a new run: not a
# reject (the bytes were not refuted) and not a new accept (nothing new was measured); nothing
# is booked for it and the session exits 15 (:mod:`...exitcodes`).
REPEAT = "repeat"
# The label every view of a verdict carries when the same bytes, decided in another run, were
# gated again because the user said the harness changed in a way that matters.
HARNESS_CHANGED_LABEL = "re-gated after a harness change — not the decision another run took on these bytes"
# The label of bytes decided in another run on a val that shares no task with this run's: a
# fresh look at them, judged at this run's level (its verdict says which).
FRESH_VAL_LABEL = "a fresh look on a val disjoint from the one these bytes were decided on"


@dataclass(frozen=True)
class Earlier:
    """The first tag a run registered with some bytes, and what was decided on it."""

    tag: str
    run_id: str
    decision: str | None  # the last booked decision on it (None: evaluated, never decided)
    level: str | None  # "α = 0.01667, Holm over 3 siblings" when its verdict records one
    in_session: bool = False  # a sibling of the same session, not yet registered
    # another run's decision taken under another harness: what differs (reported, and the
    # one case --capevolve-harness-changed may gate the bytes again, labelled)
    harness_changes: tuple[str, ...] = ()
    # another run's decision on a val that overlaps this run's without being it: (tasks shared,
    # that val's size, this val's size)
    val_overlap: tuple[int, int, int] | None = None
    fresh: bool = False  # another run's decision on a val disjoint from this run's: a fresh look
    # another project's decision, read from the shared ledger the spec names: (project, ledger)
    shared: tuple[str, str] | None = None
    # the seq of a decision booked by ``commit --force`` (a repair, or against the gate)
    repair: int | None = None
    adopted: bool = False  # an accept carried from an earlier run (its verdict a repeat): that run's stands
    text_hash: str | None = None  # its bytes' text hash, as the project's memory remembers it

    def where(self) -> str:
        """ "run R", and the project and ledger, or the val, when not this run's: what a refusal names."""
        run = f"run {self.run_id}"
        if self.shared is not None:
            run += f" ({shared_ledger.label(*self.shared)})"
        if self.val_overlap is None:
            return run
        shared, theirs, mine = self.val_overlap
        return f"{run} on a val of {theirs} tasks sharing {shared} of this run's {mine}"

    def said(self) -> str:
        """ "rejected (α = 0.01667, Holm over 3 siblings)" / "evaluated, not decided"."""
        if self.decision is None:
            return "evaluated, not decided"
        word = {"accept": "accepted", "reject": "rejected"}.get(self.decision, f"booked {self.decision}")
        if self.repair is not None:
            return f"{word} by `capevolve commit --force` (event seq {self.repair}), not by its gate"
        return f"{word} ({self.level})" if self.level else word

    def accepted_at(self) -> str:
        """ "accepted at α = 0.05, as recorded" (the level its verdict records), for a repeat."""
        if self.repair is not None:
            return self.said()
        return f"accepted at {self.level}" if self.level else "accepted"


def registered_hashes(rundir: RunDir) -> dict[str, str]:
    """Every tag the run's log registered with its content hash, in order, null controls left out."""
    hashes: dict[str, str] = {}
    for event in rundir.log.of_kinds(CANDIDATE_REGISTERED):
        tag, digest = event.get("tag"), event.get("content_hash")
        if isinstance(tag, str) and isinstance(digest, str) and null_control_of(tag) is None:
            hashes.setdefault(tag, digest)
    return hashes


def first_draws(rundir: RunDir, tag: str, digest: str) -> str | None:
    """The tag registered before ``tag`` (or before it is) with ``digest`` whose val rollouts were paid
    or gated: where those bytes' first draws are, which a gate of ``tag`` would draw afresh."""
    gated = {e.get("tag") for e in rundir.log.of_kinds(VERDICT)}
    for other, theirs in registered_hashes(rundir).items():
        if other == tag:
            return None
        if theirs == digest and (other in gated or rundir.rollouts.indexed_rollouts("val", [other])):
            return other
    return None


def earlier_with_bytes(rundir: RunDir, digest: str, *, besides: str) -> Earlier | None:
    """The tag (not ``besides``) the run first registered with ``digest``, preferring a decided one."""
    same = [t for t, d in registered_hashes(rundir).items() if d == digest and t != besides]
    if not same:
        return None
    booked = {
        str(e["tag"]): str(e["decision"])
        for e in rundir.decisions()
        if e.get("tag") in same and isinstance(e.get("decision"), str)
    }
    tag = next((t for t in same if t in booked), same[0])
    from ..gate.regate import decided_level  # here: a plain evaluation loads no gate

    level = decided_level(rundir.verdicts.verdict(tag)) if tag in booked else None
    return Earlier(tag, rundir.run_id, booked.get(tag), level.text if level else None)


def decided_in_project(rundir: RunDir, harness_now: Mapping[str, str] | None = None) -> dict[str, Earlier]:
    """content hash → the first decided tag with those bytes in another run of the project on a val sharing
    tasks with this run's. A harness that differs is reported, not a way round (re-gating after a harness
    fix is asked for with ``--capevolve-harness-changed``). ``harness_now`` stands in for a new run's lock."""
    from ..._store.readers.harness_lock import locked_harness

    project = rundir.project_dir
    if project is None:
        return {}
    try:
        locked = locked_harness(rundir)
        mine = locked if locked is not None else dict(harness_now or {})
        my_ids = [str(t) for t in (rundir.splits() or {}).get("val", [])]
    except RunDirError:
        return {}
    my_keys = task_keys.recorded(rundir)
    found = _Found(my_ids, my_keys, task_keys.Tasks.of(my_ids, my_keys), mine)
    runs = [root for root in sorted((project / RUNS_DIR).glob("*")) if (root / "events.jsonl").is_file()]
    for root in runs:
        if root.name != rundir.run_id:
            with contextlib.suppress(RunDirError):  # a damaged run is refused when opened: it decides nothing
                _decided_in_run(RunDir(root), found)
    _decided_in_memory(rundir, project, {root.name for root in runs}, found)
    return found.found


@dataclass
class _Found:
    """This run's val and harness, which other decisions are compared on, and what was found."""

    my_ids: list[str]
    my_keys: dict[str, str]
    my_val: Tasks
    harness: Mapping[str, str]
    found: dict[str, Earlier] = field(default_factory=dict)

    def seen(self, digest: str, earlier: Earlier, theirs: Tasks | None) -> None:
        """Keep the latest overlapping decision on ``digest`` (a fresh look only while none): a repair
        (``commit --force``) is what stands, an adoption yields to the decision it carried (found
        while its run is in the project), and a run's id sorts by when it was started."""
        if theirs is not None:
            shared = self.my_val.shared(theirs, self.my_keys)
            if not shared:
                earlier = replace(earlier, fresh=True)
            elif not self.my_val.same_as(theirs, self.my_keys):
                earlier = replace(earlier, val_overlap=(len(shared), len(theirs), len(self.my_val)))
        old = self.found.get(digest)
        if old is None or (not old.fresh, not old.adopted, old.run_id) <= (
            not earlier.fresh,
            not earlier.adopted,
            earlier.run_id,
        ):
            self.found[digest] = earlier


def _decided_in_run(other: RunDir, found: _Found) -> None:
    from ..._project import harness
    from ..._store.readers.harness_lock import locked_harness
    from ..gate.regate import decided_level

    theirs_val = task_keys.Tasks.of((other.splits() or {}).get("val", []), task_keys.recorded(other))
    theirs = locked_harness(other)
    differs = tuple(harness.changes(theirs, found.harness)) if theirs is not None and found.harness else ()
    hashes = registered_hashes(other)
    for event in other.decisions():
        tag = event.get("tag")
        if isinstance(tag, str) and tag in hashes and isinstance(event.get("decision"), str):
            verdict = other.verdicts.verdict(tag)
            level = decided_level(verdict)
            # a repair (``commit --force``) was taken at no gate's level: it names its event instead
            forced = event.get("repairs") is not None or bool(event.get("against_gate"))
            adopted = (
                not forced and (verdict or {}).get("decision") == REPEAT and event["decision"] == "accept"
            )
            said = level.text if level and not forced else None
            earlier = Earlier(tag, other.run_id, str(event["decision"]), said, harness_changes=differs)
            repair = int(event["seq"]) if forced else None
            found.seen(hashes[tag], replace(earlier, repair=repair, adopted=adopted), theirs_val)


def _decided_in_memory(rundir: RunDir, project: Path, present: set[str], found: _Found) -> None:
    """The decisions the project's memory and shared ledger remember of runs not ``present``."""
    from ..._project import harness

    ledger = shared_ledger.of_run(rundir)
    for row, val in remembered_decisions(project, found.my_keys.values(), ledger):
        # a run folder still there spoke through its log above; one moved out or deleted
        # speaks through the project's memory (:func:`remember_booked`)
        foreign = (str(row["project"]), str(ledger)) if "project" in row else None
        if foreign is None and (row["run_id"] == rundir.run_id or row["run_id"] in present):
            continue
        if not val.ids and not val.keys and row.get("val") != val_key(found.my_ids):
            continue  # an old row keeps its val's digest only: the same val, or unknown
        theirs = row.get("harness") if isinstance(row.get("harness"), dict) else None
        differs = tuple(harness.changes(theirs, found.harness)) if theirs and found.harness else ()
        level = row.get("level") if isinstance(row.get("level"), str) else None
        said = row.get("text_hash") if isinstance(row.get("text_hash"), str) else None
        earlier = Earlier(row["tag"], row["run_id"], row["decision"], level, harness_changes=differs)
        earlier = replace(earlier, shared=foreign, text_hash=said)
        found.seen(row["content_hash"], earlier, val if val.ids or val.keys else None)


def repeat_of(
    rundir: RunDir,
    tag: str,
    digest: str,
    *,
    best: str,
    best_digest: str | None = None,
    session: dict[str, str] | None = None,
    elsewhere: dict[str, Earlier] | None = None,
    gating: bool = True,
    rerun: bool = False,
) -> Earlier | None:
    """What a new ``tag`` with ``digest`` repeats: a tag the run registered, the best (``best_digest``), an
    earlier candidate of this session, or, when ``gating``, bytes decided in another run; None when new. A
    resumed tag and a null control repeat nothing; a ``rerun`` repeats only decided bytes."""
    if null_control_of(tag) is not None:
        return None
    if gating and elsewhere and digest in elsewhere and not elsewhere[digest].fresh:
        return elsewhere[digest]  # the same tag too: a new run is no new decision
    if tag in registered_hashes(rundir):
        return None
    earlier = earlier_with_bytes(rundir, digest, besides=tag)
    if earlier is None and best_digest == digest:
        earlier = Earlier(best, rundir.run_id, None, None)
    if earlier is None:
        twin = next((t for t, d in (session or {}).items() if d == digest and t != tag), None)
        earlier = Earlier(twin, rundir.run_id, None, None, in_session=True) if twin else None
    if earlier is None or (rerun and earlier.decision is None and not (gating and earlier.tag == best)):
        return None
    return earlier


def repeat_line(tag: str, digest: str, earlier: Earlier, *, best: str, harness_asked: bool = False) -> str:
    """The one line saying what a repeat repeated and the ways on."""
    line = _repeat_line(tag, digest, earlier, best=best)
    if earlier.harness_changes:
        shown = ", ".join(earlier.harness_changes[:3]) + (" …" if len(earlier.harness_changes) > 3 else "")
        line += (
            f" (the harness differs from run {earlier.run_id}'s: {shown}; if that change matters "
            "to what is measured, --capevolve-harness-changed gates these bytes again, labelled "
            f"'{HARNESS_CHANGED_LABEL}')"
        )
    elif harness_asked:
        line += (
            f" (--capevolve-harness-changed does not apply: the harness is the one run "
            f"{earlier.run_id} decided under)"
        )
    return line


def _repeat_line(tag: str, digest: str, earlier: Earlier, *, best: str, same: str = "") -> str:
    short = digest.split(":")[-1][:12]
    same = same or f"candidate {tag!r} is byte-identical to {earlier.tag!r} (content {short})"
    if earlier.tag == best and earlier.decision in (None, "accept") and earlier.shared is None:
        return (
            f"{same}, the best of run {earlier.run_id}: an unchanged copy of the parent, nothing to "
            "gate or pay for; change its bytes"
        )
    if earlier.decision == "accept":
        stands = "that accept stands" if earlier.repair is None else "that decision stands in that run"
        return (
            f"repeat of {earlier.tag!r} ({earlier.accepted_at()}) in {earlier.where()}: {same}; "
            f"a candidate is its bytes, so {stands} — not measured again, nothing paid"
        )
    if earlier.in_session:
        return f"{same}, a sibling in this same session: the same bytes are gated once, as {earlier.tag!r}"
    if earlier.decision is None:
        return (
            f"{same}, already evaluated in run {earlier.run_id}: a candidate is its bytes, its "
            f"rollouts are {earlier.tag!r}'s; use --capevolve-tag {earlier.tag} (or, without a gate, "
            "--capevolve-rerun for a fresh measurement)"
        )
    if earlier.shared is not None:
        return (
            f"{same}, {earlier.said()} in {earlier.where()}: a candidate is its bytes, so that "
            "decision stands for every project that names the ledger; change its bytes (or, in a "
            "new run, leave shared_ledger out of the spec to decide on this project alone)"
        )
    gate = f"capevolve gate {earlier.tag} --run-id {earlier.run_id}"
    # a repair's gate said otherwise: re-deriving the gate would not show the decision that stands
    rederive = "" if earlier.repair is not None else f" (`{gate}` re-derives it: the run that decided it)"
    return (
        f"{same}, {earlier.said()} in {earlier.where()}: a candidate is its bytes, so that "
        f"decision stands and is not taken again under a new tag or in a new run; change its bytes{rederive}"
    )


# what a verdict stands for when it decided something (``shown_decision``'s words)
DECIDED = ("accept", "reject", "repeat", "provisional", "inconclusive")


def standing_verdict(rundir: RunDir, tag: str) -> dict[str, Any] | None:
    """The verdict ``tag`` was decided by, checked against the log; None when unregistered, undecided, or a
    screen's refusal before any rollout."""
    if tag not in registered_hashes(rundir):
        return None
    recorded = rundir.verdicts.checked(tag)
    if recorded is None or not recorded.get("n_tasks"):  # decided before any rollout: a screen's
        return None
    looks = (recorded.get("details") or {}).get("looks")
    shown = shown_decision(
        str(recorded.get("decision")), recorded.get("basis"), recorded.get("delta_mean"), looks
    )
    return recorded if shown in DECIDED else None


def recorded_verdict(recorded: dict[str, Any]) -> Verdict:
    """A verdict file read back as it records (the sequential gate's is shown as it decided)."""
    names = {f.name for f in fields(Verdict)}
    return Verdict(**{k: v for k, v in recorded.items() if k in names})


def already_decided_reason(recorded: dict[str, Any], rederived: str) -> str:
    return (
        f"already decided against {recorded.get('against')!r}: the first verdict stands, "
        f"re-derived, nothing paid or written (a tag is decided once; new bytes need a new tag) — "
        f"{rederived}"
    )


def same_text_as(
    rundir: RunDir,
    tag: str,
    path: Path,
    *,
    best: str,
    elsewhere: Mapping[str, Earlier],
    mine: str | None = None,
) -> Earlier | None:
    """The decided tag (or the best) whose files differ from ``path``'s in whitespace at line ends only: in
    this run, or a decision ``elsewhere`` (:func:`decided_in_project`) whose run folder is still here.
    ``mine``: the text hash of the bytes a screen read (the ones registered), else ``path`` is read."""
    registered = registered_hashes(rundir)
    if tag in registered:
        return None  # a resume of its own bytes
    decided = {str(e["tag"]) for e in rundir.decisions() if isinstance(e.get("decision"), str)}
    wanted: list[tuple[RunDir, str, str, Earlier | None]] = [
        (rundir, t, d, None) for t, d in registered.items() if t in decided or t == best
    ]
    wanted += [(RunDir(rundir.root.parent / e.run_id), e.tag, d, e) for d, e in elsewhere.items()]
    if not wanted:
        return None
    mine = text_hash(path) if mine is None else mine
    for run, other, digest, earlier in wanted:
        if earlier and earlier.text_hash == mine and not earlier.fresh:  # its run folder moved out too
            return earlier
        try:
            snapshot = run.snapshots.snapshot_dir(other)
            if (earlier and earlier.fresh) or content_hash(snapshot) != digest or text_hash(snapshot) != mine:
                continue
        except (OSError, CandidateError, RunDirError):
            continue
        if (earlier := earlier or earlier_with_bytes(rundir, digest, besides=tag)) is not None:
            return earlier
    return None


def near_repeat_line(tag: str, earlier: Earlier, *, best: str, here: str) -> str:
    same = f"candidate {tag!r} differs from {earlier.tag!r} only in line endings or trailing whitespace"
    adopt = earlier.decision == "accept" and earlier.run_id != here and earlier.shared is None
    way = f"; only its exact bytes are adopted: propose {earlier.tag!r}'s bytes, or gate a changed version"
    return _repeat_line(tag, "", earlier, best=best, same=same) + (way if adopt else "")


KIND = "decisions"


def val_key(val_ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(val_ids)).encode("utf-8")).hexdigest()


def remember_booked(rundir: RunDir, tag: str, decision: str) -> None:
    """Remember a booked decision in the project's memory, and in the run's shared ledger."""
    from ..._store.readers.harness_lock import locked_harness
    from ..gate.regate import decided_level

    project_dir = rundir.project_dir
    content_hash = registered_hashes(rundir).get(tag)
    if project_dir is None or content_hash is None:
        return
    level = decided_level(rundir.verdicts.verdict(tag))
    val_ids = list((rundir.splits() or {}).get("val", []))
    text = None
    with contextlib.suppress(OSError, CandidateError):  # its near repeats are held once its folder goes
        text = text_hash(rundir.snapshots.snapshot_dir(tag))
    row = {
        "run_id": rundir.run_id,
        "tag": tag,
        "content_hash": content_hash,
        "val": val_key(val_ids),
        "decision": decision,
        "level": level.text if level else None,
        "harness": dict(locked_harness(rundir) or {}),
        **Tasks.of(val_ids, task_keys.recorded(rundir)).row("val"),
        **({"text_hash": text} if text else {}),
    }
    project_memory.remember(project_dir, KIND, row)
    shared_ledger.record(shared_ledger.of_run(rundir), project_dir, KIND, row)


def remembered_decisions(
    project_dir: Path, pool_keys: Iterable[str] = (), ledger: Path | None = None
) -> list[tuple[dict[str, Any], Tasks]]:
    """Every remembered decision, oldest first, with the val tasks it was taken on; from the shared
    ``ledger``, other projects' decisions matched by ``pool_keys`` (content only, with their ``project``)."""
    seen: set[tuple[Any, ...]] = set()
    rows = []
    recalled = [(row, False) for row in project_memory.recalled(project_dir, KIND)]
    recalled += [(row, True) for row in shared_ledger.meeting(ledger, project_dir, KIND, "val", pool_keys)]
    for row, foreign in recalled:
        if not foreign:
            row = {k: v for k, v in row.items() if k != "project"}
        fields = (row.get("project"), row.get("run_id"), row.get("tag"), row.get("content_hash"))
        if not all(isinstance(f, str) for f in (*fields[1:], row.get("decision"))) or fields in seen:
            continue
        seen.add(fields)
        rows.append((row, Tasks.from_row(row, "val", foreign=foreign)))
    return rows


def decided_on(
    project_dir: Path,
    run_id: str,
    test_ids: list[str],
    keys: dict[str, str] | None,
    ledger: Path | None = None,
) -> list[tuple[str, list[str]]]:
    """(run, shared tasks) for every other run whose decisions were taken on a val holding some of
    ``test_ids`` (by id or content): from logs, the memory for runs gone, and the shared ``ledger``."""
    mine = Tasks.of(test_ids, keys)
    found: dict[str, list[str]] = {}
    for root in sorted((project_dir / RUNS_DIR).glob("*")):
        if root.name == run_id or not (root / "events.jsonl").is_file():
            continue
        other = RunDir(root)
        try:
            if not other.log.of_kinds(DECISION):
                continue
            theirs = Tasks.of((other.splits() or {}).get("val", []), task_keys.recorded(other))
        except (RunDirError, OSError, ValueError):
            continue
        if shared := mine.shared(theirs, keys):
            found[other.run_id] = shared
    for row, val in remembered_decisions(project_dir, (keys or {}).values(), ledger):
        run = str(row["run_id"])
        if "project" in row:  # another project's, from the shared ledger
            run = f"{run} ({shared_ledger.label(row['project'], str(ledger))})"
        elif run == run_id or run in found:
            continue
        if shared := mine.shared(val, keys):
            found[run] = shared
    return [(f"{run} (its val: decisions were taken on them)", ids) for run, ids in sorted(found.items())]
