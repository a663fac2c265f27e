"""Verdicts from persisted rollouts: the glue between the run dir and the gate.

Used by the gate session and by ``capevolve gate``, so a verdict re-derived from the same rollouts is the
same. Gates only on val. Explore fast, gate slow, gate alone: a rollout can depend on load (timeouts, rate
limits, a shared GPU), so a gate warns when another session was paying on the project, or when it paid at a
load other than its null controls' (the run's one measure of noise). Once a null has shown a spread of
exactly 0, another of the same best under the same locked harness can only repeat it, so planning keeps
that one (it still sets the floor) and pays for no other until the best changes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np

from ..._decide.alpha_budget import look_alpha
from ..._decide.gate import decide
from ..._decide.verdict import GateConfig, Verdict
from ..._engine import confinement
from ..._project.spec import Spec
from ..._store.log.event_kinds import SESSION_LOAD
from ..._store.readers import evidence
from ..._store.readers.evidence import ByTag
from ..._store.rundir import RunDir, rollouts_of
from ..stop.stop_condition import NO_REGRESS
from ..stop.stop_condition import parse as parse_stop_condition
from . import judge
from .judge import GATE_SPLIT

Nets = tuple[int, ...] | None  # each task's net preference, for a pairwise verdict
# (tag, against) → the nets, what kept judgements from being made, and the nets at worst
Preferences = Callable[[str, str], tuple[Nets, list[str], judge.WorstCase]]


def gate_config(
    spec: Spec,
    *,
    mode: str | None = None,
    k_se: float | None = None,
    alpha: float | Fraction | None = None,
    veto_regressions: bool = False,
    regression_rule: str | None = None,
    look: int = 1,
    max_looks: int | None = None,
) -> GateConfig:
    """The gate's config for ``spec`` at α ``alpha`` (default the spec's), split across looks when the spec
    allows growth."""
    decision_alpha = spec.gate_alpha if alpha is None else alpha
    looks = spec.grow_max_looks if max_looks is None else max_looks
    return GateConfig(
        mode=mode or spec.gate_mode,
        alpha=decision_alpha if looks == 1 else look_alpha(decision_alpha, look, looks),
        k_se=spec.gate_k_se if k_se is None else k_se,
        threshold=spec.gate_threshold,
        min_coverage=spec.min_coverage,
        veto_regressions=veto_regressions,
        regression_rule=regression_rule or spec.regression_rule,
        guarded_tasks=guarded_tasks(spec),
        success_threshold=spec.success_threshold,
        seed=spec.base_seed,
        margin=spec.gate_margin if (mode or spec.gate_mode) == "exact" else 0.0,
    )


def guarded_tasks(spec: Spec) -> tuple[str, ...]:
    """The tasks the spec's ``stop_condition`` guards; the gate vetoes an accept that lowers one."""
    condition = parse_stop_condition(spec.stop_condition)
    return tuple(dict.fromkeys(p.task for p in condition.predicates if p.kind == NO_REGRESS and p.task))


class Evidence:
    """One split's rollouts of a run, as matrices per tag (read once by the caller)."""

    def __init__(
        self,
        by_tag: ByTag,
        task_ids: list[str],
        num_trials: int,
        size_of: Callable[[str], int],
        rescores: Callable[[], judge.RescoresByTag] | None = None,
        redrawn: Callable[[], set[tuple[str, str, str, int]]] | None = None,
    ) -> None:
        """``rescores``: None when not re-scored; ``redrawn()``: keys whose first attempt was an infra error.
        Each reader is called once, on first need."""
        self.by_tag, self.task_ids, self.num_trials = by_tag, task_ids, num_trials
        self._size_of, self._read_rescores, self._read_redrawn = size_of, rescores, redrawn
        self._sizes: dict[str, int] = {}
        self._cells: dict[str, evidence.Cells] = {}
        self.preferences: Preferences = lambda tag, against: (None, [], None)  # set by of_run
        self._rescores: judge.RescoresByTag | None = None
        self._refused = ""

    @classmethod
    def of_run(
        cls,
        spec: Spec,
        rundir: RunDir,
        by_tag: ByTag,
        task_ids: list[str],
        num_trials: int,
        prefer: judge.Prefer | None = None,
    ) -> Evidence:
        """A run's records with the run's readers, so no verdict lacks what another carries."""
        from ..._store.readers.evidence import redrawn_after_errors

        rescores = (lambda: judge.recorded_rescores(rundir)) if spec.judge_rescores > 1 else None
        made = cls(
            by_tag,
            task_ids,
            num_trials,
            rundir.snapshots.snapshot_size,
            rescores,
            redrawn=lambda: redrawn_after_errors(rundir),
        )
        made.preferences = lambda tag, against: judge.pairwise_nets(rundir, made, tag, against, prefer)
        return made

    def cells(self, tag: str) -> evidence.Cells:
        if tag not in self._cells:
            self._cells[tag] = evidence.cells(self.by_tag.get(tag, {}), self.task_ids, self.num_trials)
        return self._cells[tag]

    def matrix(self, tag: str) -> np.ndarray:
        cells = self.cells(tag)
        return cells.reward[cells.rows]

    def size(self, tag: str) -> int:
        if tag not in self._sizes:
            self._sizes[tag] = self._size_of(tag)
        return self._sizes[tag]

    def judge(
        self, tag: str, against: str, config: GateConfig, null_deltas: list[float | Fraction] | None = None
    ) -> Verdict:
        """Gate ``tag`` against ``against`` on the trials both have."""
        failed: list[str] = []
        worst: judge.WorstCase = None
        if config.mode == "pairwise":  # no reward floor: the sign test is its own null
            nets, failed, worst = self.preferences(tag, against)
            config, null_deltas = replace(config, preferences=nets), None
        candidate, best, _, infra_candidate, infra_best = evidence.shared_matrices(
            self.cells(tag), self.cells(against), self.num_trials
        )
        first = self._first_attempts(tag, candidate), self._first_attempts(against, best)
        infra_candidate += int(np.count_nonzero(np.isnan(first[0]) & ~np.isnan(candidate)))  # redrawn
        infra_best += int(np.count_nonzero(np.isnan(first[1]) & ~np.isnan(best)))  # as the record counts them
        verdict = decide(
            candidate,
            best,
            tag=tag,
            against=against,
            task_ids=self.task_ids,
            config=config,
            split=GATE_SPLIT,
            null_deltas=null_deltas,
            infra_errors={"candidate": infra_candidate, "best": infra_best},
            first_attempts=first,
            candidate_size=self.size(tag) if config.mode == "simplicity_tiebreak" else None,
            best_size=self.size(against) if config.mode == "simplicity_tiebreak" else None,
        )
        if config.mode == "pairwise":  # unjudged cells weighed at worst, as infra errors are
            verdict = judge.held_to_worst_case(verdict, worst)
        if failed:  # missing data, said: the next gate session asks these again
            said = (
                f"{len(failed)} paired trial(s) not judged (missing data; a gate session asks them "
                f"again): {failed[0]}"
            )
            verdict = replace(verdict, warnings=[*verdict.warnings, said])
        split = self.judge_noise(tag, against)
        return replace(verdict, judge_noise=split) if split else verdict

    @cached_property
    def redrawn(self) -> set[tuple[str, str, str, int]]:
        """The keys ``redrawn()`` names (empty without it), read once for every verdict and preference."""
        return set() if self._read_redrawn is None else self._read_redrawn()

    def _first_attempts(self, tag: str, matrix: np.ndarray) -> np.ndarray:
        """``matrix`` with each trial whose first attempt was an infra error missing: candidate code may
        choose which draws end in an error."""
        cells = [
            (row, k)
            for row, task_id in enumerate(self.task_ids)
            for k in range(matrix.shape[1])
            if (GATE_SPLIT, tag, task_id, k) in self.redrawn
        ]
        if not cells:
            return matrix
        first = matrix.copy()
        rows, cols = zip(*cells, strict=True)
        first[list(rows), list(cols)] = np.nan
        return first

    def judge_noise(self, tag: str, against: str) -> dict[str, Any]:
        """The split of Var(Δ̄) from the re-scores of the cells both have; ``{}`` without."""
        if self._read_rescores is None:
            return {}
        if self._rescores is None:
            try:
                self._rescores = self._read_rescores()
            except judge.EditedRescores as exc:  # said on every verdict, never split on
                self._refused = str(exc)
                self._rescores = {}
        if self._refused:
            return {"refused": self._refused}
        scores = (self._rescores.get(tag, {}), self._rescores.get(against, {}))
        arms = (self.by_tag.get(tag, {}), self.by_tag.get(against, {}))
        wanted = set(self.task_ids)
        shared = [
            cell
            for cell in arms[0].keys() & arms[1].keys() & scores[0].keys() & scores[1].keys()
            if cell[0] in wanted and cell[1] < self.num_trials
        ]
        sides: tuple[judge.PerTask, judge.PerTask] = ({}, {})
        for task_id, k in sorted(shared):
            for side, score in zip(sides, scores, strict=True):
                side.setdefault(task_id, []).append(score[(task_id, k)])
        return judge.split_entry(*sides)


def null_deltas(verdicts: list[Verdict]) -> list[float | Fraction]:
    """The null controls' Δ̄ as the exact fractions their verdicts recorded (else the float)."""
    return [
        Fraction(v.delta_exact) if v.delta_exact is not None else v.delta_mean
        for v in verdicts
        if v.delta_mean is not None
    ]


def verdict_file(verdict: Verdict, **extra: Any) -> dict[str, Any]:
    data = {**verdict.to_dict(), **extra}
    # confined or not: the candidate code whose rollouts this session ran, and the optimizer
    data.setdefault("confinement", confinement.said())
    data["rollouts"] = (
        f"{rollouts_of(GATE_SPLIT, verdict.tag)}, against those whose tag is {verdict.against}"
        if verdict.n_tasks
        else "none: decided before any rollout was paid"
    )
    return data


def null_config(config: GateConfig) -> GateConfig:
    """A null control is judged "better", whatever ``gate_margin`` asks: a copy of the best is no worse
    than δ below it, so a margin would sound the calibration alarm on an honest run."""
    return replace(config, margin=0.0)


def as_null(verdict: Verdict) -> Verdict:
    if verdict.decision != "accept":
        return verdict
    alarm = (
        "CALIBRATION ALARM: a byte-identical copy of the best was accepted; the gate is not holding its "
        "error rate on this run"
    )
    return replace(verdict, warnings=[*verdict.warnings, alarm])


def load_event(concurrency: int, workers: int, owed_by_tag: Mapping[str, int]) -> dict[str, Any]:
    return {
        "concurrency": int(concurrency),
        "workers": int(workers),
        "in_flight": int(concurrency) * int(workers),
        "paid_tags": dict(sorted(owed_by_tag.items())),
    }


def loads_by_tag(events: Iterable[dict[str, Any]]) -> dict[str, set[int]]:
    loads: defaultdict[str, set[int]] = defaultdict(set)
    for event in (e for e in events if e.get("kind") == SESSION_LOAD):
        for tag in event.get("paid_tags") or {}:
            loads[str(tag)].add(int(event.get("in_flight") or 1))
    return dict(loads)


def null_means_by_load(
    loads: Mapping[str, set[int]], null_tags: Iterable[str], means: Mapping[str, float]
) -> dict[int, float]:
    """The null rollouts' reward mean at each load, over the null tags paid at that load alone."""
    pooled: dict[int, list[float]] = {}
    for tag in null_tags:
        at = loads.get(tag, set())
        if len(at) == 1 and tag in means:
            pooled.setdefault(next(iter(at)), []).append(means[tag])
    return {load: sum(values) / len(values) for load, values in sorted(pooled.items())}


def load_warnings(
    *,
    in_flight: int,
    null_tags: list[str],
    loads: Mapping[str, set[int]],
    means: Mapping[str, float],
    others: list[dict[str, Any]],
) -> list[str]:
    lines = []
    if others:
        who = ", ".join(f"pid {o.get('pid')} in run {o.get('run_id')}" for o in others[:3])
        lines.append(
            f"this gate did not run alone: {len(others)} other session(s) were paying rollouts on "
            f"the project ({who}); explore fast, gate slow, gate alone — a load another session "
            "adds can change rollouts (timeouts, rate limits), so gate again with nothing else running"
        )
    measured = sorted(set().union(*(loads.get(t, set()) for t in null_tags))) if null_tags else []
    if measured and in_flight not in measured:
        by_load = null_means_by_load(loads, null_tags, means)
        shown = ", ".join(f"{load} in flight: {mean:.3f}" for load, mean in by_load.items())
        lines.append(
            f"this gate paid at {in_flight} rollout(s) in flight, but its null controls were "
            f"measured at {', '.join(map(str, measured))}"
            + (f" (null reward means — {shown})" if shown else "")
            + ": the run has not measured noise at this load; gate at the nulls' load "
            f"({_as_flags(measured)}), or with fresh null controls (--capevolve-null N after a new best) "
            "at this one"
        )
    return lines


def _as_flags(loads: list[int]) -> str:
    """The session flags that pay at one of ``loads`` (in flight = pytest's -n workers ×
    --capevolve-concurrency): the way on names what to type, not a count of rollouts."""
    said = [
        "a session without -n and --capevolve-concurrency"
        if load == 1
        else f"-n W and --capevolve-concurrency K with W × K = {load}"
        for load in loads
    ]
    return " or ".join(said)


def identical_null(rundir: RunDir, best: str, n_tasks: int, nulls: int) -> str | None:
    """The first of the best's nulls whose checked verdict has every one of ``n_tasks`` deltas exactly 0."""
    for i in range(1, nulls + 1):
        tag = f"{best}-null{i}"
        if tag not in rundir.snapshots.known_tags():
            continue
        verdict = rundir.verdicts.checked(tag)  # as the gate logged it, or refused
        if not verdict or not verdict.get("null_control") or verdict.get("against") != best:
            continue
        rows = list((verdict.get("per_task") or {}).values())
        if len(rows) == n_tasks and n_tasks > 0 and all(row.get("delta") == 0 for row in rows):
            return tag
    return None


def identical_note(tag: str, best: str) -> str:
    return (
        f"null controls: {tag} showed a spread of exactly 0 against {best!r} (a reproducible agent); "
        "no other null is paid for while the best, the adapter and the spec are unchanged"
    )
