"""The finalize session: ``pytest --capevolve-finalize PROJECT`` scores the test split once.

The seal is claimed before planning (a refused session pays nothing); the best, and the seed when it differs
(so the improvement is paired), are evaluated from snapshots; the seal burns only once every planned rollout
reported, so an interrupted session leaves it unburned and the next one reuses what is persisted."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from .. import exitcodes
from .._project.candidate import SEED_TAG
from .._project.spec import Spec
from .._show.measure import UNJUDGED_KINDS, paired_summary, unjudged_label, unjudged_tags
from .._show.numbers import interval
from .._store.decisions.state_tally import labelled_accepts
from .._store.log.event_kinds import DECISION
from .._store.memory.project_seal import REUSED_LABEL
from .._store.memory.seal import TEST_SPLIT, Seal
from .._store.readers import evidence
from .._store.readers.evidence import ByTag, first_errors, index_records
from .._store.rundir import RunDir, rollouts_of
from .outcome import Outcome
from .persistence import Persistence, record_finish, summarize
from .planning import Planned


@dataclass(eq=False)  # a plugin: identity, not value, equality
class FinalizeSession:
    config: pytest.Config
    spec: Spec
    rundir: RunDir
    planned: Planned
    seal: Seal
    persistence: Persistence
    # acknowledged reuse (--capevolve-test-reused): the runs whose scored test tasks this shares
    test_reused: list[tuple[str, list[str]]] | None = None

    def conclude(self) -> Outcome:
        plan, tally = self.planned.plan, self.persistence.tally
        by_tag = index_records(self.seal.test_rollouts())
        outcome = summarize(plan, by_tag, tally, against=self.planned.best)
        lost = [k for k in outcome.missing if by_tag.get(k.tag, {}).get((k.task_id, k.trial)) is None]
        short = [r for r in outcome.rows if r.coverage < self.spec.min_coverage]
        if lost or tally.dead_workers or short:
            outcome.exit_code = exitcodes.INFRA_FAILURE
            outcome.say(
                "the test split was NOT scored: some rollouts are missing; the seal is unburned. "
                "Run finalize again: it pays only for what is missing",
                red=True,
            )
        else:
            result = self._test_result(outcome, by_tag)
            # Seam for users (and our crash test): runs before the burn; if it raises or the
            # process dies here, the seal stays unburned and the rollouts stay reusable.
            self.config.hook.pytest_capevolve_test_scored(result=result, run_dir=self.rundir.root)
            if self.test_reused:
                result["test_reused"] = {
                    "label": REUSED_LABEL,
                    "scored_before": [{"run_id": r, "tasks": ids} for r, ids in self.test_reused],
                }
            self.seal.burn(result, plan.task_ids)
            outcome.exit_code = exitcodes.OK
            outcome.closing += [(line, {}) for line in self._scored_lines(result)]
        record_finish(self.spec, self.rundir, plan, tally, outcome, by_tag)
        return outcome

    def _test_result(self, outcome: Outcome, by_tag: ByTag) -> dict[str, Any]:
        plan, best = self.planned.plan, self.planned.best
        rows = {r.tag: r for r in outcome.rows}
        matrices = {
            c.tag: evidence.reward_matrix(by_tag.get(c.tag, {}), plan.task_ids, plan.num_trials)
            for c in plan.candidates
        }
        # what the candidate causes counts against it: a test trial whose first attempt was an
        # infra error counts as a failure of the best and a pass of the seed, whatever it was
        # paid again as (the figures over valid trials alone are kept beside)
        errored = first_errors(self.rundir, TEST_SPLIT)
        worst = {tag: _worst_case(m, tag, errored, plan.task_ids, tag == best) for tag, m in matrices.items()}
        counted = {tag: int(n) for tag, (_, n) in worst.items() if n}

        def arm(tag: str) -> dict[str, Any]:
            shown = {**rows[tag].to_dict(), "content_hash": plan.candidate(tag).content_hash}
            if counted:
                mean = float(np.nanmean(np.nanmean(worst[tag][0], axis=1)))
                shown |= {"mean_valid_trials": shown["mean"], "mean": mean}
            return shown

        seed = arm(SEED_TAG) if best != SEED_TAG else None
        delta = (
            None if seed is None else paired_summary(worst[best][0], worst[SEED_TAG][0], seed=plan.base_seed)
        )
        result = {
            "run_id": plan.run_id,
            "split": TEST_SPLIT,
            "scored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tasks": len(plan.task_ids),
            "trials": plan.num_trials,
            "best": arm(best),
            "seed": seed,
            "delta_vs_seed": delta,
            # a gate cut off before its verdict decided nothing: no null result while one is left
            "null_result": best == SEED_TAG and not self.unjudged,
            "rollouts": rollouts_of(TEST_SPLIT, "<tag>"),
            "infra_errors": sum(r.infra for r in outcome.rows),
        }
        if counted:
            result["worst_case"] = {
                "trials": counted,
                "rule": "a test trial whose first attempt was an infra error counts as 0 for the best and 1 "
                "for the seed (what the candidate causes counts against it); mean_valid_trials: over the "
                "valid trials alone",
            }
        return result

    @functools.cached_property
    def unjudged(self) -> list[str]:
        """Candidates of this run paid on val that no session judged (:func:`unjudged_tags`)."""
        if self.planned.best != SEED_TAG:
            return []
        # the kinds it reads, found by their bytes: not every rollout line decoded (60,000 at scale)
        return unjudged_tags(self.rundir, self.rundir.log.of_kinds(*UNJUDGED_KINDS))

    def _scored_lines(self, result: dict[str, Any]) -> list[str]:
        best = result["best"]
        labels = labelled_accepts(self.rundir.log.of_kinds(DECISION))
        shown = f"{best['tag']!r} ({labels[best['tag']]})" if best["tag"] in labels else repr(best["tag"])
        lines = [f"test split scored once and sealed: best {shown} mean {best['mean']:.4f}"]
        delta = result["delta_vs_seed"]
        if delta is not None:
            ci = interval(delta["ci"], "+.4f")
            lines.append(f"best − seed on test: {delta['mean']:+.4f} (95% CI {ci}, n = {delta['n']})")
        elif unjudged := self.unjudged:
            lines.append(f"best is the seed, {unjudged_label(self.rundir, unjudged, finalized=True)}")
        else:
            lines.append("best is the seed: a null result (no accepted change to measure)")
        lines.append(f"seal: {self.seal.path}")
        if result.get("test_reused"):
            before = ", ".join(f"run {r['run_id']}" for r in result["test_reused"]["scored_before"])
            lines.insert(0, f"{REUSED_LABEL}: these test tasks were scored before ({before})")
        worst = result.get("worst_case")
        if worst:
            trials = ", ".join(f"{tag} {n}" for tag, n in worst["trials"].items())
            lines.insert(
                1,
                f"worst case counted: test trials whose first attempt was an infra error ({trials}) count "
                f"as failures of the best and passes of the seed; over valid trials alone the best's mean "
                f"is {best.get('mean_valid_trials', best['mean']):.4f}",
            )
        return lines

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.seal.release()


def _worst_case(
    matrix: np.ndarray, tag: str, errored: set[tuple[str, str, str, int]], task_ids: list[str], is_best: bool
) -> tuple[np.ndarray, int]:
    """``matrix`` with each cell of ``tag`` whose first attempt was an infra error set to what flatters it
    least (0 for the best, 1 for any other arm), and how many cells that set."""
    out = matrix.astype(float, copy=True)
    row = {t: i for i, t in enumerate(task_ids)}
    n = 0
    for _split, key_tag, task_id, trial in errored:
        if key_tag == tag and task_id in row and trial < out.shape[1]:
            out[row[task_id], trial] = 0.0 if is_best else 1.0
            n += 1
    return out, n
