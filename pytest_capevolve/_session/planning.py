"""Planning: which candidates a session evaluates and which rollouts it owes.

Controller only, before any item exists; the plan travels to xdist workers through ``workerinput``. Nothing
is paid while planning; a candidate refused by a screen is never registered."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._engine import confinement
from .._items.plan import EvalPlan, PlannedCandidate
from .._policy import guards
from .._policy.repeats.identity import (
    FRESH_VAL_LABEL,
    HARNESS_CHANGED_LABEL,
    REPEAT,
    Earlier,
    decided_in_project,
    first_draws,
    repeat_line,
    repeat_of,
    standing_verdict,
)
from .._project.candidate import SEED_TAG, CandidateError, check_tag, content_hash, null_control_of
from .._project.spec import Spec, SpecError, splits_for, to_stored
from .._project.splits import TEST_SPLIT
from .._project.way_on import commit_command
from .._store.log.event_kinds import FINALIZE_STARTED, SESSION_STARTED
from .._store.memory import task_keys
from .._store.memory.seal import Seal
from .._store.rundir import RunDir, RunDirError
from .._store.sessions import markers
from .plan_build import build_plan, valid_column_keys, valid_keys
from .refusals import Screens


@dataclass
class CandidateRequest:
    tag: str
    path: Path


@dataclass(frozen=True)
class GateRequest:
    enabled: bool = False
    nulls: int = 0
    veto_regressions: bool = False
    commit: str = "auto"  # auto: book each verdict as a decision; none: leave them as evidence
    multiple: str = "holm"  # the family-wise correction across a round's siblings
    sequential: bool = False  # --capevolve-sequential: e-processes per task, stop once decided
    # gate settings given as -o capevolve_<key>=value: recorded in each verdict and said
    overridden: tuple[tuple[str, str], ...] = ()
    # --capevolve-harness-changed: bytes decided in another run under another harness are gated
    # again, each such verdict labelled (never a silent second decision)
    harness_changed: bool = False
    regression_rule: str | None = None  # --capevolve-regression-rule (None: the spec's)
    # the loop's α schedule by default: why (:mod:`.._policy.alpha.gate_settings`)
    schedule_why: str | None = None


@dataclass
class Planned:
    """What planning decided: the plan, the best it compares against, and the null controls."""

    plan: EvalPlan
    best: str
    null_tags: list[str] = field(default_factory=list)
    waiting_on: list[Path] = field(default_factory=list)  # other sessions' claims this one needs
    notes: list[str] = field(default_factory=list)  # what planning chose not to pay for, and why
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)  # tag → harness-changed label
    # tag → its standing verdict (:mod:`.._policy.repeats.identity`): re-derived, never judged again
    decided: dict[str, dict[str, Any]] = field(default_factory=dict)


def planned_at(spec: Spec, rundir: RunDir, tag: str, path: Path, digest: str) -> PlannedCandidate:
    """The registered candidate ``tag`` (from ``path``), evaluated from its snapshot, never from ``path``
    (the optimizer may still edit it). Paths relative to the project, so a worker on a copy finds them."""
    snapshot = rundir.snapshots.snapshot_dir(tag)
    return PlannedCandidate(
        tag, to_stored(snapshot, spec.project_dir), digest, source=to_stored(path, spec.project_dir)
    )


def next_free_tag(base: str, taken: set[str]) -> str:
    n = 2
    while f"{base}-r{n}" in taken:
        n += 1
    return f"{base}-r{n}"


def frozen_ids(rundir: RunDir, splits: dict[str, Any], split: str, pool_ids: Iterable[str]) -> list[str]:
    task_ids = list(splits[split])
    missing = sorted(set(task_ids) - set(pool_ids))
    if missing:
        raise CandidateError(
            f"run {rundir.run_id}: the frozen {split} split names tasks the adapter no "
            f"longer returns: {', '.join(map(repr, missing[:5]))}"
        )
    return task_ids


def source_of(spec: Spec, rundir: RunDir, tag: str) -> Path:
    """Where the best's bytes come from: the seed's folder or a tag's snapshot (never its source folder)."""
    if tag == SEED_TAG:
        return spec.capability_path
    snapshot = rundir.snapshots.snapshot_dir(tag)
    if not snapshot.is_dir():
        raise RunDirError(
            f"run {rundir.run_id}: the best {tag!r} has no snapshot at {snapshot}; the run dir is "
            "damaged (restore that folder from a backup, or start a new run with --capevolve-new-run)"
        )
    return snapshot


@dataclass
class Repeats:
    """The repeat screen of one planning (:mod:`.._policy.repeats.identity`)."""

    rundir: RunDir
    best: str
    best_path: Path
    gate: GateRequest
    rerun: bool
    harness_now: Mapping[str, str] | None
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)  # tag → its harness-changed label
    session: dict[str, str] = field(default_factory=dict)
    _best_digest: str | None = None
    _decided_elsewhere: dict[str, Earlier] | None = None

    def _elsewhere(self) -> dict[str, Earlier]:
        if self._decided_elsewhere is None:
            self._decided_elsewhere = (
                decided_in_project(self.rundir, self.harness_now) if self.gate.enabled else {}
            )
        return self._decided_elsewhere

    def _first_draws(self, tag: str, digest: str) -> None:
        """Refuse to gate a later draw of bytes this run drew first under another tag (a rerun's)."""
        if self.gate.enabled and (first := first_draws(self.rundir, tag, digest)) is not None:
            raise CandidateError(
                f"--capevolve-gate for {tag!r}: its bytes were first drawn as {first!r} in this run; the "
                "gate reads a candidate's first draws, never a later draw of the same bytes (choosing among "
                f"redraws re-rolls the gate): gate {first!r} (--capevolve-tag {first}, without "
                "--capevolve-rerun)"
            )

    def refused(self, tag: str, path: Path, screens: Screens) -> bool:
        digest = content_hash(path)
        screened = screens.screened.get(tag)
        if screened is not None and digest != screened:  # what is checked here is what the screens read
            raise CandidateError(
                f"{path} no longer holds the bytes checked ({screened}): not registered; register it again "
                "once nothing writes to it"
            )
        if self._best_digest is None:
            self._best_digest = content_hash(self.best_path)
        elsewhere = self._elsewhere()
        other_run = elsewhere.get(digest) if self.gate.enabled else None
        if other_run is not None:
            earlier_of = {
                "earlier_run": other_run.run_id,
                "earlier_tag": other_run.tag,
                "earlier_decision": other_run.decision,
            }
            if other_run.fresh:  # decided in another run on a val disjoint from this run's: a fresh look
                level = {"earlier_level": other_run.level}
                self.labels[tag] = {"label": FRESH_VAL_LABEL, "fresh_val": True, **earlier_of, **level}
            if other_run.harness_changes and self.gate.harness_changed:
                # the user says the harness changed in a way that matters: gated again, labelled
                changes = list(other_run.harness_changes)
                self.labels[tag] = {"label": HARNESS_CHANGED_LABEL, **earlier_of, "harness_changes": changes}
                elsewhere = {d: e for d, e in elsewhere.items() if d != digest}
        earlier = repeat_of(
            self.rundir,
            tag,
            digest,
            best=self.best,
            best_digest=self._best_digest,
            session=self.session,
            elsewhere=elsewhere,
            gating=self.gate.enabled,
            rerun=self.rerun,
        )
        self.session.setdefault(tag, digest)
        said = None
        if earlier is None and self.gate.enabled:
            # not the bytes, but the text of a decided tag or the best (a trailing space, CRLF)
            from .._policy.repeats.identity import near_repeat_line, same_text_as

            mine = screens.screened_text.get(tag)  # the text of the bytes the screens read (registered)
            earlier = same_text_as(self.rundir, tag, path, best=self.best, elsewhere=elsewhere, mine=mine)
            here = self.rundir.run_id
            said = near_repeat_line(tag, earlier, best=self.best, here=here) if earlier is not None else None
        if earlier is None:
            self._first_draws(tag, digest)
            return False
        self.labels.pop(tag, None)  # a repeat within this run is one whatever the harness
        asked = self.gate.harness_changed and earlier is other_run
        if said is None:
            said = repeat_line(tag, digest, earlier, best=self.best, harness_asked=asked)
        # bytes already accepted are not refuted by being gated again: the verdict says it is a
        # repeat of that accept (decision "repeat", exit 15), and nothing new is booked
        accepted = earlier.decision == "accept"
        screens.refuse(
            tag,
            self.best,
            REPEAT if accepted else "reject",
            guards.REPEAT,
            f"never paid for: {said}",
            {
                "repeats": earlier.tag,
                "content_hash": digest,
                "earlier_run": earlier.run_id,
                "earlier_decision": earlier.decision,
                "earlier_level": earlier.level,
                "source": str(path),
                **(
                    {"shared_ledger": {"project": earlier.shared[0], "ledger": earlier.shared[1]}}
                    if earlier.shared
                    else {}
                ),
            },
        )
        return True


def plan_evaluation(
    spec: Spec,
    rundir: RunDir,
    pool_ids: list[str],
    requests: list[CandidateRequest],
    split: str,
    *,
    rerun: bool,
    gate: GateRequest,
    screens: Screens,
    block: int = 0,
    harness_now: Mapping[str, str] | None = None,
    task_keys_now: Callable[[], Mapping[str, str]] | None = None,
    test_reused: bool = False,
) -> Planned:
    """The plan of an evaluation (or gate) session, under the run's lock, so a later planner owes only what
    the earlier neither persisted nor claimed; ``screens`` may refuse a candidate before it is registered."""
    splits, task_ids, notes = _frozen(spec, rundir, pool_ids, split, gate, task_keys_now, test_reused)
    best = rundir.state.best()
    best_path = source_of(spec, rundir, best)
    chosen = _chosen(requests, best, best_path, rerun, set(rundir.snapshots.known_tags()))
    screens.prepare(splits[TEST_SPLIT], splits["val"], harness_now)  # before anything is registered or paid
    repeats = Repeats(rundir, best, best_path, gate, rerun, harness_now)
    chosen, only_best_left, decided = _kept(rundir, chosen, best, gate, screens, repeats)
    register = rundir.snapshots.register_candidate  # the bytes a screen read, or refused (``expected``)
    planned = [
        planned_at(spec, rundir, c.tag, c.path, register(c.tag, c.path, screens.screened.get(c.tag)))
        for c in chosen
    ]
    # a gate left with the best alone (all refused, or the best asked again) decides nothing: no nulls
    nulls = 0 if only_best_left else gate.nulls
    null_tags = _null_controls(spec, rundir, (best, best_path), planned, nulls, len(task_ids), notes)
    claimed = rundir.claims.others()
    deciding = len([c for c in planned if c.tag != best and c.tag not in null_tags]) if gate.enabled else 0
    plan = build_plan(
        spec,
        rundir,
        split,
        task_ids,
        planned,
        # the plan's tags and the seed: what the session's conclusion and measure read again
        valid_column_keys(
            rundir.rollouts.indexed_columns(split, {c.tag for c in planned} | {SEED_TAG}, block)
        ),
        SESSION_STARTED,
        # what its sandbox children will say of their boundary: a later verdict reads it
        candidate_code=confinement.expected().label,
        decisions=deciding,
        claimed=claimed,
        block=block,
    )
    if gate.sequential:
        _sequential_orders(rundir, plan, planned, [best, *null_tags], task_ids)
    plan.live = uuid.uuid4().hex
    markers.create_live(rundir.root, plan.live)
    waiting_on = sorted({claimed[k] for k in plan.awaited})
    labels = {tag: label for tag, label in repeats.labels.items() if tag in {c.tag for c in planned}}
    notes += [
        f"{tag}: {label['label']} (run {label['earlier_run']} booked {label['earlier_decision']} on "
        f"{label['earlier_tag']!r} under a harness that differs: {', '.join(label['harness_changes'][:3])})"
        for tag, label in labels.items()
        if not label.get("fresh_val")
    ]
    return Planned(plan, best, null_tags, waiting_on, notes, labels, decided)


def refuse_sealed_in_dev(
    spec: Spec, rundir: RunDir, splits: Mapping[str, Any], *, acknowledged: bool
) -> str | None:
    """Refuse a run whose val or train holds test tasks the project scored (selecting on them spends the
    seal). Acknowledged with ``--capevolve-test-reused``: the note to say instead; None when fresh."""
    from .._project.splits import TestSealError
    from .._store.memory.project_seal import sealed_dev_line, sealed_in_dev
    from .._store.memory.shared_ledger import of_run

    keys = task_keys.recorded(rundir)
    found = sealed_in_dev(spec.project_dir, rundir.run_id, splits, keys, of_run(rundir))
    if not found:
        return None
    line = sealed_dev_line(rundir.run_id, found)
    if not acknowledged:
        raise TestSealError(line)
    return f"acknowledged with --capevolve-test-reused: {line.split(';')[0]}"


def _refuse_an_accept_left_unbooked(rundir: RunDir, best: str) -> None:
    """A finalize seals the best; an accept of the best left unbooked could never be booked after it."""
    from .._policy.gate.regate import booked_decision  # here: a finalize's check; an evaluation loads no gate

    pending = [
        tag
        for tag, verdict in rundir.verdicts.verdicts().items()
        if verdict.get("decision") == "accept"
        and verdict.get("against") == best
        and not null_control_of(tag)
        and booked_decision(rundir, tag) is None
    ]
    if pending:
        tag, run = pending[0], (rundir.project_dir, rundir.run_id)
        raise RunDirError(
            f"run {rundir.run_id}: {tag!r} has an ACCEPT against the best {best!r} that no decision books; a "
            f"finalize now would seal {best!r}, and no accept can be booked in a finalized run. Book it "
            f"first ({commit_command(tag, 'accept', *run)}), or pass on it on the record "
            f"({commit_command(tag, 'reject', *run, '--reject-basis', 'gate', '--force')}), then finalize"
        )


def plan_finalize(spec: Spec, rundir: RunDir, pool_ids: list[str], seal: Seal) -> Planned:
    """The plan of a finalize: the best, and the seed when it differs, on test, from snapshots."""
    rundir.ensure_spec_lock(spec)
    splits = rundir.splits()
    if splits is None:
        raise RunDirError(f"run {rundir.run_id} has no frozen splits yet; evaluate first")
    task_ids = frozen_ids(rundir, splits, TEST_SPLIT, pool_ids)
    if not task_ids:
        raise RunDirError(
            f"run {rundir.run_id}: the test split is empty, so there is no held-out score "
            "to produce; give split_test a share (in a new run) to have one"
        )
    best = rundir.state.best()
    _refuse_an_accept_left_unbooked(rundir, best)
    if SEED_TAG not in rundir.snapshots.known_tags():
        rundir.snapshots.register_candidate(SEED_TAG, spec.capability_path)
    planned = []
    for tag in [best] + ([SEED_TAG] if best != SEED_TAG else []):
        digest = rundir.snapshots.candidate_hash(tag)
        if digest is None:
            raise RunDirError(f"run {rundir.run_id}: best {tag!r} has no snapshot to finalize")
        planned.append(planned_at(spec, rundir, tag, rundir.snapshots.snapshot_dir(tag), digest))
    plan = build_plan(
        spec,
        rundir,
        TEST_SPLIT,
        task_ids,
        planned,
        valid_keys(seal.test_rollouts()),
        FINALIZE_STARTED,
        best=best,
    )
    return Planned(plan, best)


def refuse_unknown_guards(spec: Spec, val_ids: list[str]) -> None:
    """A ``stop_condition`` guard naming no val task guards nothing (ids are exact): refused."""
    from .._policy.gate.verdicts import guarded_tasks

    known = set(val_ids)
    for task in guarded_tasks(spec):
        if task not in known:
            close = sorted(t for t in known if t.casefold() == task.casefold())
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SpecError(
                f"{spec.path}: stop_condition guards task {task!r}, which is no val task of this run "
                f"(a guard holds val tasks, by their exact id){hint}"
            )


def _frozen(
    spec: Spec,
    rundir: RunDir,
    pool_ids: list[str],
    split: str,
    gate: GateRequest,
    task_keys_now: Callable[[], Mapping[str, str]] | None,
    test_reused: bool,
) -> tuple[dict[str, Any], list[str], list[str]]:
    """(splits, this split's ids, notes), frozen with the run; refused first: a gate of a finalized run,
    scored test tasks in dev, an unknown guard."""
    rundir.ensure_spec_lock(spec)
    if gate.enabled:
        guards.refuse_finalized(rundir, guards.Checkpoint.SESSION)
    splits = rundir.ensure_splits(lambda: splits_for(spec, pool_ids))
    task_keys.ensure_recorded(rundir, task_keys_now, splits)
    sealed_note = refuse_sealed_in_dev(spec, rundir, splits, acknowledged=test_reused)
    task_ids = frozen_ids(rundir, splits, split, pool_ids)
    if gate.enabled:
        refuse_unknown_guards(spec, splits["val"])
    return splits, task_ids, [sealed_note] if sealed_note else []


def _chosen(
    requests: list[CandidateRequest], best: str, best_path: Path, rerun: bool, taken: set[str]
) -> list[CandidateRequest]:
    """The candidates asked for (or the best), tags checked (``rerun``: the next free), the best first."""
    chosen: list[CandidateRequest] = []
    for request in requests or [CandidateRequest(best, best_path)]:
        tag = check_tag(request.tag)
        if rerun:
            tag = next_free_tag(tag, taken)
            taken.add(tag)
        chosen.append(CandidateRequest(tag, request.path))
    if best not in {c.tag for c in chosen}:
        chosen.insert(0, CandidateRequest(best, best_path))
    if len({c.tag for c in chosen}) != len(chosen):
        raise CandidateError("two candidates share a tag; give each its own --capevolve-tag")
    return chosen


def _kept(
    rundir: RunDir,
    chosen: list[CandidateRequest],
    best: str,
    gate: GateRequest,
    screens: Screens,
    repeats: Repeats,
) -> tuple[list[CandidateRequest], bool, dict[str, dict[str, Any]]]:
    """(candidates to register, whether only the best is left, the decided tags); none to register when a
    gate's screens refused every candidate (the best alone decides nothing)."""
    others = [c.tag for c in chosen if c.tag not in (best, SEED_TAG)] if gate.enabled else []
    decided = {tag: found for tag in others if (found := standing_verdict(rundir, tag)) is not None}
    kept = [
        c
        for c in chosen
        if c.tag in (best, SEED_TAG)
        or not (
            (c.tag in decided and bool((decided[c.tag].get("details") or {}).get("sequential")))
            or screens.refused(c.tag, c.path, best)
            or repeats.refused(c.tag, c.path, screens)
        )
    ]
    only_best_left = all(c.tag in (best, SEED_TAG) for c in kept)
    nothing_to_gate = gate.enabled and len(kept) < len(chosen) and only_best_left
    return ([] if nothing_to_gate else kept), only_best_left, decided


def _null_controls(
    spec: Spec,
    rundir: RunDir,
    best_at: tuple[str, Path],
    planned: list[PlannedCandidate],
    nulls: int,
    n_tasks: int,
    notes: list[str],
) -> list[str]:
    """Null controls: copies of the best under derived tags, registered and planned; one identical null
    stands for all (said in ``notes``)."""
    best, best_path = best_at
    null_tags = [f"{best}-null{i}" for i in range(1, nulls + 1)]
    if null_tags:  # only a gate plans nulls: a plain evaluation loads no gate
        from .._policy.gate.verdicts import identical_note, identical_null
    identical = identical_null(rundir, best, n_tasks, nulls) if null_tags else None
    if identical is not None and len(null_tags) > 1:
        null_tags = [identical]
        notes.append(identical_note(identical, best))
    for tag in null_tags:  # registered from the best's bytes, which a worker's earlier copy holds too
        digest = rundir.snapshots.register_candidate(tag, best_path)
        planned.append(planned_at(spec, rundir, tag, best_path, digest))
    return null_tags


def _sequential_orders(
    rundir: RunDir, plan: EvalPlan, planned: list[PlannedCandidate], followers: list[str], task_ids: list[str]
) -> None:
    """Each candidate's order, fixed by its bytes, the run's secret and a nonce drawn now, so no one can
    compute it in advance; the item order interleaves them. The best and its null controls (``followers``:
    copies of it, nothing to gain from an order) take that session order."""
    from .._decide.task_order import interleaved, task_order

    secret = rundir.order_secret.read()
    gated = [c for c in planned if c.tag not in followers]
    nonces = rundir.order_secret.nonces([c.content_hash for c in gated])
    plan.orders = {
        c.tag: task_order(task_ids, secret, c.content_hash, bytes.fromhex(nonces[c.content_hash]))
        for c in gated
    }
    plan.order = interleaved(plan.orders.values())
    plan.sequential = uuid.uuid4().hex
