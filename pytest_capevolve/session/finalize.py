"""The finalize session: ``pytest --capevolve-finalize PROJECT`` scores the test split once.

Controller role for that session (registered instead of :class:`controller.Controller`). It
claims the seal before planning anything, so a refused session pays nothing and writes
nothing; it evaluates the current best — and the seed beside it, when they differ, so the
held-out improvement is a paired number — from their immutable snapshots in the run dir; it
burns the seal only after every planned rollout reported and the score is computed. An
interrupted or crashed session leaves the seal unburned, and the next one reuses every
rollout already persisted (it cannot redraw them).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from ..decide import evidence
from ..decide.evidence import index_records
from ..project.candidate import SEED_TAG
from ..project.spec import Spec
from ..show.measure import paired_summary
from ..store.rundir import RunDir, RunDirError, read_json
from ..store.seal import TEST_SPLIT, Seal
from . import exitcodes
from .controller import Controller, location_for
from .plan import EvalPlan, PlannedCandidate


class FinalizeController(Controller):
    def __init__(self, config: pytest.Config, spec: Spec, rundir: RunDir, pool_ids: list[str]) -> None:
        self._setup(config, spec, rundir, None)
        self.seal = Seal(rundir)
        self.seal.claim()
        self.result: dict[str, Any] | None = None
        try:
            self.plan = self._plan_test(pool_ids)
        except BaseException:
            self.seal.release()
            raise

    def _plan_test(self, pool_ids: list[str]) -> EvalPlan:
        spec, rundir = self.spec, self.rundir
        rundir.ensure_spec_lock(spec)
        if not rundir.splits_path.is_file():
            raise RunDirError(f"run {rundir.run_id} has no frozen splits yet; evaluate first")
        task_ids = self._frozen_ids(read_json(rundir.splits_path), TEST_SPLIT, pool_ids)
        if not task_ids:
            raise RunDirError(
                f"run {rundir.run_id}: the test split is empty, so there is no held-out score "
                "to produce; give split_test a share (in a new run) to have one"
            )
        self.best = str(rundir.read_state().get("best_id", SEED_TAG))
        tags = [self.best] + ([SEED_TAG] if self.best != SEED_TAG else [])
        if SEED_TAG not in rundir.known_tags():
            rundir.register_candidate(SEED_TAG, spec.capability_path)
        planned = []
        for tag in tags:
            digest = rundir.candidate_hash(tag)
            if digest is None:
                raise RunDirError(f"run {rundir.run_id}: best {tag!r} has no snapshot to finalize")
            snapshot = rundir.candidate_dir(tag) / "files"
            planned.append(PlannedCandidate(tag, location_for(snapshot, spec.project_dir), digest))
        return self._build_plan(
            TEST_SPLIT, task_ids, planned, self.seal.test_records(), "finalize_started", best=self.best
        )

    def _read_records(self) -> Iterator[dict[str, Any]]:
        return self.seal.test_records()

    def finish(self) -> None:
        records = index_records(self._read_records())
        self._summarize(records)
        lost = [k for k in self.missing if records.get(k.tag, {}).get((k.task_id, k.trial)) is None]
        short = [r for r in self.rows if r.coverage < self.spec.min_coverage]
        if lost or self.tally.dead_workers or short:
            self.exit_code = exitcodes.INFRA_FAILURE
        else:
            result = self._test_result(records)
            # Seam for users (and our crash test): runs before the burn; if it raises or the
            # process dies here, the seal stays unburned and the rollouts stay reusable.
            self.config.hook.pytest_capevolve_test_scored(result=result, run_dir=self.rundir.root)
            self.seal.burn(result)
            self.result = result
            self.exit_code = exitcodes.OK
        self._log_finish()

    def _test_result(self, records: dict[str, dict[tuple[str, int], dict[str, Any]]]) -> dict[str, Any]:
        plan = self.plan
        rows = {r.tag: r for r in self.rows}
        matrices = {
            c.tag: evidence.reward_matrix(records.get(c.tag, {}), plan.task_ids, plan.num_trials)
            for c in plan.candidates
        }

        def arm(tag: str) -> dict[str, Any]:
            planned = next(c for c in plan.candidates if c.tag == tag)
            return {**rows[tag].to_dict(), "content_hash": planned.content_hash}

        seed = arm(SEED_TAG) if self.best != SEED_TAG else None
        delta = None
        if seed is not None:
            delta = paired_summary(matrices[self.best], matrices[SEED_TAG], seed=plan.base_seed)
        return {
            "run_id": plan.run_id,
            "split": TEST_SPLIT,
            "scored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tasks": len(plan.task_ids),
            "trials": plan.num_trials,
            "best": arm(self.best),
            "seed": seed,
            "delta_vs_seed": delta,
            "null_result": self.best == SEED_TAG,
            "rollouts": f"rollouts/{TEST_SPLIT}/*__<tag>__t*.json",
            "infra_errors": sum(r.infra for r in self.rows),
        }

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.seal.release()

    def _print_summary(self, tr: Any) -> None:
        super()._print_summary(tr)
        if not self.rows:
            return
        if self.result is None:
            tr.write_line(
                "the test split was NOT scored: some rollouts are missing; the seal is unburned. "
                "Run finalize again: it pays only for what is missing",
                red=True,
            )
            return
        best = self.result["best"]
        tr.write_line(f"test split scored once and sealed: best {best['tag']!r} mean {best['mean']:.4f}")
        delta = self.result["delta_vs_seed"]
        if delta is not None:
            ci = "—" if delta["ci"] is None else f"[{delta['ci'][0]:+.4f}, {delta['ci'][1]:+.4f}]"
            tr.write_line(f"best − seed on test: {delta['mean']:+.4f} (95% CI {ci}, n = {delta['n']})")
        else:
            tr.write_line("best is the seed: a null result (no accepted change to measure)")
        tr.write_line(f"seal: {self.seal.path}")
