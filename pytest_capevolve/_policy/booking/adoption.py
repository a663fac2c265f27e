"""Adopting bytes an earlier run accepted (``capevolve commit TAG --decision accept`` on a ``REPEAT``,
``capevolve hill-climb`` on its optimizer's repeat): only its gate's accept, against the same bytes as
this run's best, on the same val, under the same recorded gate settings (the α schedule aside, when the level
it was decided at is ≤ this run's α) and harness. Booked, it moves the
best unpaid; the next session that needs the best's val rollouts pays them once in this run, as the seed's
baseline (docs/explanation/a-candidate-is-its-bytes.md says why they are not carried over)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from ..._project.candidate import SEED_TAG, CandidateError, content_hash
from ..._project.spec import Spec
from ..._store.decisions.state_tally import label_of
from ..._store.files import RunDirError
from ..._store.log.event_kinds import DECISION
from ..._store.rundir import RunDir
from ..alpha.gate_settings import KEY, decided_under, settings_of
from ..gate.regate import decided_level
from ..repeats.identity import REPEAT, Earlier, decided_in_project, registered_hashes
from .commit_checks import CommitRefused

WAY_ON = "gate a changed version"


class Adopted(NamedTuple):
    label: str  # what every view of this best shows
    snapshot: Path  # the earlier run's snapshot of the bytes, registered in this run on booking
    # the parent's bytes and the hash checked, registered as this run's seed on booking when it had none
    seed: tuple[Path, str] | None


def adoption(rundir: RunDir, verdict: dict[str, Any] | None, best: str, spec: Spec) -> Adopted | None:
    """The earlier run's accept that a repeat ``verdict`` names, when this run may adopt it; None when the
    verdict repeats no accept of another run. Raises CommitRefused saying why it may not, and the way on."""
    details = (verdict or {}).get("details") or {}
    if (verdict or {}).get("decision") != "repeat" or details.get("earlier_decision") != "accept":
        return None
    digest = str(details.get("content_hash") or "").removeprefix("sha256:")
    earlier = next(
        (e for d, e in decided_in_project(rundir).items() if d.removeprefix("sha256:") == digest), None
    )
    if earlier is None or earlier.shared is not None or earlier.fresh or earlier.decision != "accept":
        return None
    accepted = f"{earlier.tag!r} was accepted in run {earlier.run_id}"
    if not (rundir.root.parent / earlier.run_id).is_dir():  # remembered by the project's memory alone
        raise CommitRefused(
            f"{accepted}, whose record is not in this project any more: not adopted; {WAY_ON}"
        )
    there = RunDir(rundir.root.parent / earlier.run_id)
    snapshot = there.snapshots.snapshot_dir(earlier.tag)
    try:  # the verdict as that run's gate logged it, the decision booked on it, and the bytes it accepted
        decided = there.verdicts.checked(earlier.tag) or {}
        booked = [dict(e) for e in there.log.of_kinds(DECISION) if e.get("tag") == earlier.tag][-1:] or [{}]
        if content_hash(snapshot).removeprefix("sha256:") != digest:  # what this run would register
            raise RunDirError(f"its snapshot {snapshot} no longer holds the bytes it registered")
    except (RunDirError, OSError, CandidateError) as exc:
        raise CommitRefused(f"{accepted}, but its record there does not check ({exc}); {WAY_ON}") from None
    against = decided.get("against")
    why = _another_question(decided, booked[0], decided_under(rundir, spec), earlier)  # as this run froze
    parent = "" if why else _same_parent(there, rundir, against, best, spec)
    if not why and not parent:
        why = f"against {against!r} there, whose bytes differ from this run's best {best!r}: not adopted"
    if why:
        raise CommitRefused(f"{accepted} {why}" + ("" if "; " in why else f"; {WAY_ON}"))
    schedule, level = decided["details"]["gate_settings"].get(KEY), decided_level(decided)  # as decided
    at = f" under gate_alpha_schedule {schedule}" + (f" at {level.text}" if level else "")
    label = f"adopted: accepted against the same bytes as {best!r} in run {earlier.run_id}{at}"
    if said := label_of(booked[0]):  # re-gated under a changed harness there: so it stays
        label = f"{said.split(' — ')[0]} — in run {earlier.run_id}, adopted"
    unfrozen = best == SEED_TAG and best not in registered_hashes(rundir)  # its seed is what it was against
    seed = (spec.capability_path, parent) if unfrozen else None
    return Adopted(label + ", not gated again", snapshot, seed)


def _another_question(decided: dict[str, Any], booked: dict[str, Any], spec: Spec, earlier: Earlier) -> str:
    """Why the earlier accept was not its gate's, or answered another question (another val, any gate
    setting but the α schedule at a level ≤ this run's α, or one its verdict does not record) or harness;
    "" when it answered this run's."""
    details = decided.get("details") or {}
    theirs, source = details.get("gate_settings"), details.get("earlier_run")
    if decided.get("decision") == REPEAT and not booked.get("against_gate"):  # adopted there, not gated
        there = f"run {source}" if source else "another run"
        return f"(adopted there from {there}, whose record is not in this project any more): not adopted"
    if booked.get("decision", "accept") != "accept":  # its gate's accept, then a forced repair there
        return f"but repaired there to {booked['decision']} (event seq {booked.get('seq')}): not adopted"
    if booked.get("against_gate") or decided.get("decision") != "accept":
        return f"against its gate (which said {decided.get('decision')!r}): only a gate's accept is adopted"
    if earlier.val_overlap is not None:
        return f"on another val ({earlier.where()}): an accept decided on other tasks is not adopted"
    if not isinstance(theirs, dict):
        return "by a verdict that records no gate settings: the question it answered is unknown"
    differ = {k: v for k, v in settings_of(spec).items() if theirs.get(k, ...) != v}
    if (level := decided_level(decided)) and float(level.alpha) <= spec.gate_alpha and KEY in theirs:
        differ.pop(KEY, None)  # a single test at a level ≤ this run's α is as strict as a one-shot gate here
    if differ:
        said = ", ".join(f"{k} {theirs.get(k, 'not recorded')} (this run: {v})" for k, v in differ.items())
        named = ", ".join(f"{k}: {theirs.get(k)}" for k in differ if k != KEY or len(differ) < 2)
        there = (
            f", or adopt it in a new run whose spec names {named}" if differ.keys() <= theirs.keys() else ""
        )
        return f"under {said}: that accept answered another question and is not adopted; {WAY_ON}{there}"
    if earlier.harness_changes:
        return (
            f"under another harness ({', '.join(earlier.harness_changes[:3])}): not adopted; gate it again "
            "here with --capevolve-harness-changed (its verdicts are labelled)"
        )
    return ""


def _same_parent(there: RunDir, rundir: RunDir, parent: Any, best: str, spec: Spec) -> str:
    """The hash of the bytes the earlier accept was against when they are this run's best's; "" if not."""
    theirs, mine = registered_hashes(there).get(str(parent)), registered_hashes(rundir).get(best)
    if mine is None and best == SEED_TAG:  # a new run whose first session met only the repeat
        try:
            mine = content_hash(spec.capability_path)
        except (OSError, CandidateError):
            return ""
    return theirs if parent is not None and theirs is not None and theirs == mine else ""
