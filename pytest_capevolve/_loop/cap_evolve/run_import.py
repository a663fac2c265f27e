"""A cap-evolve run written as a new run of the imported project, through the run dir.

Its candidates registered, every rollout recorded, its best booked, and a burned test seal
where cap-evolve scored test. Pays no rollout; a failure discards the half-imported run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..._decide.basis import Basis
from ..._project.candidate import SEED_TAG, CandidateError
from ..._show.measure import paired_summary
from ..._show.report import summarize_arm
from ..._store.log.event_kinds import BEST_CHANGED, CAP_EVOLVE_IMPORTED
from ..._store.memory.seal import Seal
from ..._store.readers.evidence import index_records, reward_matrix
from ..._store.rundir import RunDir
from .run_reader import CapEvolveRun

SPLITS_FILE = "cap_evolve_splits.json"


def import_run(run: CapEvolveRun, spec: Any) -> dict[str, Any]:
    """Write the cap-evolve run into a new run of the imported project, through the run dir."""
    with RunDir.project_lock(spec.project_dir):
        rundir = RunDir.resolve(spec.project_dir, new=True)
        try:
            return _fill_run(rundir, run, spec)
        except BaseException:
            rundir.discard_if_created()  # no half-imported run left behind
            raise


def _fill_run(rundir: RunDir, run: CapEvolveRun, spec: Any) -> dict[str, Any]:
    rundir.ensure_spec_lock(spec)
    rundir.ensure_splits(
        lambda: {**run.splits, "source": {"split_ids_file": SPLITS_FILE, "cap_evolve_run": str(run.root)}}
    )
    folders: dict[str, Path | None] = dict(run.snapshots)
    for rollout in run.rollouts:
        folders.setdefault(run.tag_for(rollout), run.snapshot_for(rollout))
    hashes: dict[str, str] = {}
    for tag, folder in sorted(folders.items()):
        if folder is None:
            continue
        try:
            hashes[tag] = rundir.snapshots.register_candidate(tag, folder)
        except CandidateError as exc:
            run.unreadable.append(f"{folder}: {exc}")
    skipped: dict[str, int] = {}
    counts: dict[str, int] = {}
    for rollout in run.rollouts:
        tag = run.tag_for(rollout)
        if tag not in hashes:
            skipped[rollout.tag] = skipped.get(rollout.tag, 0) + 1
            continue
        record = rollout.record(
            run_id=rundir.run_id,
            tag=tag,
            seed=run.split_seed + rollout.trial,
            candidate_hash=hashes[tag],
            threshold=spec.success_threshold,
        )
        rundir.rollouts.record_rollout(record)
        counts[f"{rollout.split}/{tag}"] = counts.get(f"{rollout.split}/{tag}", 0) + 1
    # the import's record first: it is what explains the best_changed below
    # (:class:`..._store.decisions.state_tally.BestRule`)
    rundir.log.append_event(
        CAP_EVOLVE_IMPORTED,
        source=str(run.root),
        best_id=run.best_id,
        rollouts=sum(counts.values()),
        skipped=skipped,
        cap_evolve_spent=run.state.get("spent"),
        cap_evolve_budget=run.state.get("budget"),
    )
    if run.best_id != SEED_TAG and run.best_id in hashes:
        # as replaying the log will read it: a best changed without a booked decision (logged
        # first, so state.json is written current to the event that explains it)
        with rundir.lock():
            rundir.log.append_event(
                BEST_CHANGED, best_id=run.best_id, previous=SEED_TAG, basis=Basis.CAP_EVOLVE_IMPORT
            )
            rundir.state.update_state(
                lambda state: state.update(best_id=run.best_id, iterations=state["iterations"] + 1, stall=0)
            )
    seal = _seal(rundir, run, spec) if run.test_used else "sealed: cap-evolve never scored the test split"
    return {
        "source": str(run.root),
        "run_id": rundir.run_id,
        "run_dir": str(rundir.root),
        "best": run.best_id,
        "tags": sorted(hashes),
        "rollouts": counts,
        "skipped": {
            tag: f"{n} rollout(s): cap-evolve kept no snapshot candidates/{tag}/, so which bytes "
            "they measured is unknown"
            for tag, n in skipped.items()
        },
        "unreadable": run.unreadable,
        "test": seal,
    }


def _seal(rundir: RunDir, run: CapEvolveRun, spec: Any) -> str:
    """cap-evolve scored its test split once: our seal burns with that score, never to score again."""
    seal = Seal(rundir)
    seal.claim()
    try:
        by_tag = index_records(seal.test_rollouts())
        test_ids = run.splits["test"]
        best = run.best_id

        def arm(tag: str) -> dict[str, Any]:
            row = summarize_arm(
                by_tag.get(tag, {}),
                tag=tag,
                split="test",
                task_ids=test_ids,
                num_trials=spec.num_trials,
                paid=0,
                reused=len(by_tag.get(tag, {})),
            )
            return {**row.to_dict(), "content_hash": rundir.snapshots.candidate_hash(tag)}

        seed_row = arm(SEED_TAG) if best != SEED_TAG and SEED_TAG in by_tag else None
        delta = None
        if seed_row is not None:
            delta = paired_summary(
                reward_matrix(by_tag[best], test_ids, spec.num_trials),
                reward_matrix(by_tag[SEED_TAG], test_ids, spec.num_trials),
                seed=spec.base_seed,
            )
        result = {
            "run_id": rundir.run_id,
            "split": "test",
            "scored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tasks": len(test_ids),
            "trials": spec.num_trials,
            "best": arm(best),
            "seed": seed_row,
            "delta_vs_seed": delta,
            "null_result": best == SEED_TAG,
            "rollouts": "rollouts/test/*__<tag>__t*.json",
            "infra_errors": sum(r.infra_error is not None for a in by_tag.values() for r in a.values()),
            "imported_from": str(run.root),
        }
        seal.burn(result, list(test_ids))  # the project remembers these test tasks as scored
    finally:
        seal.release()
    mean = result["best"]["mean"]
    shown = "no valid test rollout was kept" if mean is None else f"best {best!r} test mean {mean:.4f}"
    return f"burned by cap-evolve's finalize: {shown} (seal.json)"
