"""Verdicts from persisted rollouts: the glue between the run dir and :mod:`gate`.

Used by the gate session on the controller (after the run loop) and by ``capevolve gate``,
so a verdict re-derived later from the same rollouts is the same verdict. Reads only the
val split: the gate never sees train or test.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..project.spec import Spec
from ..store.rundir import RunDir, atomic_write_json
from . import evidence
from .gate import GateConfig, Verdict, decide

GATE_SPLIT = "val"


def gate_config(
    spec: Spec,
    *,
    mode: str | None = None,
    k_se: float | None = None,
    alpha: float | None = None,
    veto_regressions: bool = False,
) -> GateConfig:
    return GateConfig(
        mode=mode or spec.gate_mode,
        alpha=spec.gate_alpha if alpha is None else alpha,
        k_se=spec.gate_k_se if k_se is None else k_se,
        threshold=spec.gate_threshold,
        min_coverage=spec.min_coverage,
        veto_regressions=veto_regressions,
        success_threshold=spec.success_threshold,
        seed=spec.base_seed,
    )


class Evidence:
    """The val rollouts of a run, loaded once, as matrices per tag."""

    def __init__(
        self,
        rundir: RunDir,
        task_ids: list[str],
        num_trials: int,
        by_tag: dict[str, dict[tuple[str, int], dict[str, Any]]] | None = None,
    ) -> None:
        """``by_tag``: val records already indexed by the caller (the controller has just read
        them for its summary); read from the run dir otherwise."""
        self.rundir = rundir
        self.task_ids = task_ids
        self.num_trials = num_trials
        if by_tag is None:
            by_tag = evidence.index_records(rundir.iter_rollouts(GATE_SPLIT))
        self.by_tag = by_tag
        self._sizes: dict[str, int] = {}

    def matrix(self, tag: str) -> np.ndarray:
        return evidence.reward_matrix(self.by_tag.get(tag, {}), self.task_ids, self.num_trials)

    def infra(self, tag: str) -> int:
        return evidence.infra_count(self.by_tag.get(tag, {}), self.task_ids, self.num_trials)

    def size(self, tag: str) -> int:
        """Bytes of the tag's snapshot (for simplicity_tiebreak); walked once per tag."""
        if tag not in self._sizes:
            files = self.rundir.candidate_dir(tag) / "files"
            self._sizes[tag] = sum(p.stat().st_size for p in files.rglob("*") if p.is_file())
        return self._sizes[tag]

    def judge(
        self, tag: str, against: str, config: GateConfig, null_deltas: list[float] | None = None
    ) -> Verdict:
        return decide(
            self.matrix(tag),
            self.matrix(against),
            tag=tag,
            against=against,
            task_ids=self.task_ids,
            config=config,
            split=GATE_SPLIT,
            null_deltas=null_deltas,
            infra_errors={"candidate": self.infra(tag), "best": self.infra(against)},
            candidate_size=self.size(tag),
            best_size=self.size(against),
        )


def null_deltas(verdicts: list[Verdict]) -> list[float]:
    return [v.delta_mean for v in verdicts if v.delta_mean is not None]


def write_verdict(rundir: RunDir, verdict: Verdict, extra: dict[str, Any] | None = None) -> None:
    data = {**verdict.to_dict(), **(extra or {})}
    data["rollouts"] = (
        f"rollouts/{GATE_SPLIT}/*__{verdict.tag}__t*.json vs *__{verdict.against}__t*.json"
        if verdict.n_tasks
        else "none: decided before any rollout was paid"
    )
    atomic_write_json(rundir.verdict_path(verdict.tag), data)
    rundir.append_event(
        "verdict",
        tag=verdict.tag,
        against=verdict.against,
        decision=verdict.decision,
        basis=verdict.basis,
        p_value=verdict.p_value,
        delta_mean=verdict.delta_mean,
    )


def as_null(verdict: Verdict) -> Verdict:
    """A null control's verdict: it must be reject; an accept is a calibration alarm."""
    if verdict.decision == "accept":
        return replace(
            verdict,
            warnings=[
                *verdict.warnings,
                "CALIBRATION ALARM: a byte-identical copy of the best "
                "was accepted; the gate is not holding its error rate on this run",
            ],
        )
    return verdict
