"""Finished runs compared with the gate's own test: each candidate against the baseline.

Each pair is decided by :func:`~.._decide.gate.decide` in the ``exact`` mode, as a gate session
decides a candidate against its best; Holm's levels across the pairs
(:func:`~.._decide.rounds.family_levels`) hold the chance of any false accept at α. What holds
for imported results is part of every answer (:meth:`Comparison.promises`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .._decide.bands import band_of
from .._decide.basis import Basis
from .._decide.gate import decide
from .._decide.rounds import family_levels
from .._decide.verdict import GateConfig, Verdict
from .pairing import COMMON, DIFFER, NOT_SHOWN, Pairing, pair
from .readers import ReadOptions, read_results
from .results import ImportedRun, ResultsError
from .table import read_cluster_map

MULTIPLE = ("holm", "none")

SEEDS_SAID = {
    # a seed recorded is a seed asked for: the files cannot show the agent (or its model) honoured it
    COMMON: "both runs record the same seed for every trial paired (common random numbers, where the "
    "agent honours its seed)",
    DIFFER: "the runs record different seeds, so paired trials did not share random numbers (the test "
    "stays valid; it pairs tasks, and is less sensitive)",
    NOT_SHOWN: "common trial seeds are not shown (no trial measured in both runs has its seed in both "
    "files), so the trials are not known to share random numbers",
}


@dataclass(frozen=True)
class CompareSettings:
    """How to decide: the gate's own settings, and how α is shared across several pairs."""

    alpha: float = 0.05
    min_coverage: float = 0.8
    multiple: str = "holm"
    regression_rule: str = "noise"
    veto_regressions: bool = False
    success_threshold: float = 1.0
    margin: float = 0.0  # < 0: "no worse than margin" (non-inferiority), _stats/margin.py
    equivalence: float = 0.0  # > 0: "within ±equivalence" (two one-sided tests)

    def gate_config(self, level: Fraction | None = None, clusters: tuple[str, ...] = ()) -> GateConfig:
        return GateConfig(
            clusters=clusters,
            mode="exact",
            alpha=self.alpha if level is None else level,
            min_coverage=self.min_coverage,
            veto_regressions=self.veto_regressions,
            regression_rule=self.regression_rule,
            success_threshold=self.success_threshold,
            margin=self.margin,
            equivalence=self.equivalence,
        )

    @property
    def question(self) -> str:
        """What each run is asked, in the words every answer uses."""
        if self.equivalence:
            return f"within ±{self.equivalence:g} of the baseline (equivalence)"
        if self.margin:
            return f"no worse than {self.margin:+g} (non-inferiority)"
        return "better than the baseline"


@dataclass
class PairResult:
    """One candidate against the baseline: the pairing, the verdict, the α it was decided at."""

    candidate: ImportedRun
    pairing: Pairing
    verdict: Verdict
    level: Fraction
    tasks: list[dict[str, Any]] = field(default_factory=list)  # per task: means, delta, bands

    @property
    def band_moves(self) -> dict[str, int]:
        """How many tasks moved from one band to another ("defect→solid": 3)."""
        moves = Counter(
            f"{t['baseline_band']}→{t['candidate_band']}"
            for t in self.tasks
            if t["baseline_band"] != t["candidate_band"]
        )
        return dict(sorted(moves.items()))


@dataclass
class Comparison:
    baseline: ImportedRun
    pairs: list[PairResult]
    settings: CompareSettings

    @property
    def decisions(self) -> list[str]:
        return [p.verdict.decision for p in self.pairs]

    @property
    def accepted(self) -> bool:
        """Every run accepted against the baseline (what a CI job waits for)."""
        return all(d == "accept" for d in self.decisions)

    def promises(self) -> dict[str, list[str]]:
        """What holds for these imported results, and what does not — said in every answer."""
        settings, pairs = self.settings, self.pairs
        test = (
            f"the question is {settings.question}: a betting test over the tasks measured in both "
            "runs (fixed bets, p = 1/E), whose false-accept rate is at most α for any rewards in "
            "[0, 1] when the tasks are independent; the margin is part of every p and bound shown"
            if settings.margin or settings.equivalence
            else "the test is the gate's own: a one-sided exact paired sign-flip test over the tasks "
            "measured in both runs (p exact on a reward grid, seeded Monte Carlo off one: p_method "
            "says which); its false-accept rate is at most α when the runs are independent "
            "evaluations of the same tasks"
        )
        holds = [
            test,
            "missing data stays missing: an errored sample is never a 0; paired coverage below "
            f"{settings.min_coverage:.0%} is indecisive, and so are unequal errors that could flip a "
            "decision",
        ]
        if len(pairs) > 1:
            holds.append(
                f"{len(pairs)} runs against one baseline: Holm's step-down across the pairs keeps the "
                "chance of any false accept at most α"
                if settings.multiple == "holm"
                else f"{len(pairs)} runs each decided at α (--multiple none): the chance of any false "
                f"accept is up to {len(pairs)}·α"
            )
        not_hold: list[str] = []
        for result in pairs:
            name, seeds = result.candidate.label, result.pairing.seeds
            (holds if seeds == COMMON else not_hold).append(f"{name}: {SEEDS_SAID[seeds]}")
            if result.pairing.clusters:
                holds.append(
                    f"{name}: its tasks come in {len(set(result.pairing.clusters))} clusters: the test "
                    "flips whole clusters (exact whatever the dependence within one) and the interval "
                    "is cluster-robust"
                )
            elif settings.margin or settings.equivalence:
                not_hold.append(
                    f"{name}: tasks are taken as independent, as a margin needs them (clusters are refused "
                    "with --margin and --equivalence); if several share a source, the margin's α does not "
                    "hold: ask whether the run is better instead, with --clusters FILE or a cluster column"
                )
            else:
                not_hold.append(
                    f"{name}: tasks are taken as independent; if several share a source, give their clusters "
                    "(--clusters FILE, or a cluster column) so the test flips whole clusters"
                )
            if result.pairing.labels_differ is not None:
                not_hold.append(
                    _labels_said(name, result.pairing.labels_differ, result.pairing.rows_in_one_file)
                )
            if result.pairing.trials_by == "position" and result.pairing.baseline.shape[1] > 1:
                not_hold.append(f"{name}: the files label no trials; a task's trials are paired by position")
        not_hold += [
            "nothing is sealed: these tasks may be the ones the runs were tuned on, so a gain here is "
            "a gain on these tasks, not a held-out estimate",
            "how the runs were chosen is unknown: α covers this comparison, not the best of many runs "
            "tried, nor a run repeated until it won",
            "no null control: how far two runs of the same thing differ is not measured here; compare "
            "two runs of the baseline (capevolve compare A A-again) to see that noise",
        ]
        return {"hold": holds, "do_not_hold": not_hold}

    def to_dict(self) -> dict[str, Any]:
        """The whole answer as plain JSON: every number behind every decision."""
        return {
            "baseline": _run_dict(self.baseline),
            "alpha": self.settings.alpha,
            "multiple": self.settings.multiple,
            "min_coverage": self.settings.min_coverage,
            "question": self.settings.question,
            "margin": self.settings.margin or None,
            "equivalence": self.settings.equivalence or None,
            "comparisons": [_pair_dict(p) for p in self.pairs],
            "promises": self.promises(),
        }


def compare_files(
    paths: Sequence[Path],
    settings: CompareSettings,
    *,
    format: str | None = None,
    options: Sequence[ReadOptions] | None = None,
    clusters: Path | None = None,
) -> Comparison:
    """Read ``paths`` (the baseline first; ``options`` one per path) and compare them."""
    if len(paths) < 2:
        raise ResultsError(
            "compare needs two runs or more: the baseline first, then each run to decide against it"
        )
    chosen = list(options or [])
    chosen += [ReadOptions()] * (len(paths) - len(chosen))
    runs = [read_results(Path(p), format=format, options=o) for p, o in zip(paths, chosen, strict=True)]
    cluster_map = None if clusters is None else read_cluster_map(Path(clusters))
    return compare_runs(runs[0], runs[1:], settings, cluster_map)


def compare_runs(
    baseline: ImportedRun,
    candidates: Sequence[ImportedRun],
    settings: CompareSettings,
    cluster_map: Mapping[str, str] | None = None,
) -> Comparison:
    """Decide every candidate against ``baseline`` (see the module's docstring)."""
    if settings.multiple not in MULTIPLE:
        raise ValueError(
            f"unknown multiple-testing method {settings.multiple!r}; use one of {', '.join(MULTIPLE)}"
        )
    _check_question(settings)
    candidates = _distinct_labels(baseline, candidates)
    pairings = [pair(baseline, c, cluster_map) for c in candidates]
    if (settings.margin or settings.equivalence) and any(p.clusters for p in pairings):
        raise ResultsError(
            "a margin is tested with tasks taken as independent; clustered tasks are not supported "
            "with --margin or --equivalence yet: drop --clusters (and any cluster column) for the "
            "margin question, or ask the superiority question with the clusters"
        )

    def judge(run: ImportedRun, pairing: Pairing, level: Fraction | None = None) -> Verdict:
        config = settings.gate_config(level, pairing.clusters)
        return decide(
            pairing.candidate,
            pairing.baseline,
            tag=run.label,
            against=baseline.label,
            task_ids=pairing.task_ids,
            config=config,
            infra_errors=dict(pairing.infra_errors),
        )

    first = [judge(c, p) for c, p in zip(candidates, pairings, strict=True)]
    alpha = Fraction(str(settings.alpha))
    p_values = [Fraction(v.p_exact) if v.p_exact else Fraction(1) for v in first]
    levels = family_levels(p_values, alpha, settings.multiple)
    results = []
    for run, pairing, verdict, level in zip(candidates, pairings, first, levels, strict=True):
        if level != alpha and verdict.p_exact:  # decided again at its Holm level, exactly
            verdict = judge(run, pairing, level)
            verdict = replace(verdict, reason=f"{verdict.reason} (Holm across {len(candidates)} runs)")
        if not set(pairing.task_ids) - set(pairing.only_in_baseline) - set(pairing.only_in_candidate):
            verdict = replace(verdict, reason=f"{verdict.reason}; {_no_shared_task(baseline, run)}")
        elif verdict.basis in (Basis.ERROR_IMBALANCE, Basis.COVERAGE) and any(pairing.lacking.values()):
            verdict = replace(verdict, reason=f"{verdict.reason}; {_lacking_said(pairing)}")
        elif verdict.basis == Basis.COVERAGE:  # errored samples, each missing data, never a 0
            verdict = replace(verdict, reason=f"{verdict.reason}; {ERRORS_WAY_ON}")
        results.append(PairResult(run, pairing, verdict, level, _task_rows(pairing, verdict, settings)))
    return Comparison(baseline, results, settings)


ERRORS_WAY_ON = (
    "the pairs missing are errored samples (missing data, never counted as 0): run them again "
    "(inspect_ai's `inspect eval-retry`, or your harness's retry) and compare the completed results; "
    "or, if this coverage is evidence enough for you, lower the bar with --min-coverage"
)


def _check_question(settings: CompareSettings) -> None:
    """A margin the test cannot ask, refused in words (the fixture's keywords reach here unparsed)."""
    if settings.margin and settings.equivalence:
        raise ResultsError("ask one question: a non-inferiority margin or an equivalence bound, not both")
    if not -1 < settings.margin <= 0:
        raise ResultsError(
            f"margin {settings.margin:g}: a non-inferiority margin lies in (-1, 0]: -0.02 asks "
            "'no worse than 0.02 below the baseline'; for 'better' leave it out"
        )
    if not 0 <= settings.equivalence < 1:
        raise ResultsError(
            f"equivalence {settings.equivalence:g}: an equivalence bound lies in (0, 1): 0.05 asks "
            "'within ±0.05 of the baseline'"
        )


def _no_shared_task(baseline: ImportedRun, run: ImportedRun) -> str:
    """The way on when two runs name no task alike: their ids, side by side."""
    shown = [", ".join(r.task_ids[:3]) + (", …" if len(r.task_ids) > 3 else "") for r in (baseline, run)]
    return (
        f"the runs share no task id (baseline: {shown[0]}; {run.label}: {shown[1]}); pair them by "
        "giving both files the same task ids"
    )


def _labels_said(name: str, labels_differ: tuple[str, list[str], list[str]], rows: int) -> str:
    """Trials numbered differently in the two files, and the way on: a trial labelled in one file
    only is paired with none and weighed as missing, however many trials both runs have."""
    task, base, cand = labels_differ
    return (
        f"{name}: trials are paired by their labels, and the files label a task's trials differently "
        f"(task {task!r}: baseline {', '.join(base)}; candidate {', '.join(cand)}), so "
        f"{rows} rows of shared tasks have no partner and are weighed as missing; "
        "if they are the same trials numbered differently (from 0 and from 1), renumber one file's "
        "trial column, or leave the trial column out of both files to pair them by position"
    )


def _lacking_said(pairing: Pairing) -> str:
    """Why rows one file lacks count as missing data, what they are, and the way on: the gate's
    reason speaks of infra errors, and there were none where a run simply has more trials."""
    parts = []
    trials, lacking = pairing.trials_a_task, pairing.lacking
    shown = trials.get("best") is not None and trials.get("candidate") is not None
    if shown and trials["best"] != trials["candidate"]:
        parts.append(f"the baseline has {trials['best']} trials a task, the candidate {trials['candidate']}")
    elif pairing.rows_in_one_file:
        parts.append(f"{pairing.rows_in_one_file} trials of shared tasks are in one file only")
    for side, only in (("baseline", pairing.only_in_baseline), ("candidate", pairing.only_in_candidate)):
        if only:
            parts.append(f"{len(only)} tasks are in the {side}'s file only")
    counts = " and ".join(
        f"the {side}'s {lacking[key]}"
        for side, key in (("candidate", "candidate"), ("baseline", "best"))
        if lacking.get(key)
    )
    return (
        f"{counts} are rows one file lacks, not errors ({'; '.join(parts)}); a row left out could have "
        "been left out for its reward, so they are weighed as errors are: evaluate both runs on the "
        "same tasks with the same number of trials"
    )


def _distinct_labels(baseline: ImportedRun, candidates: Sequence[ImportedRun]) -> list[ImportedRun]:
    """Runs whose labels collide (two ``results.csv`` in different folders) are named by path."""
    labels = Counter(r.label for r in (baseline, *candidates))
    named = [replace(r, label=str(r.path)) if labels[r.label] > 1 else r for r in candidates]
    taken = {baseline.label}
    distinct = []
    for run in named:  # the same file twice (a null check: compare A A) is told apart by number
        label, number = run.label, 1
        while label in taken:
            number += 1
            label = f"{run.label} ({number})"
        taken.add(label)
        distinct.append(replace(run, label=label) if label != run.label else run)
    return distinct


def _task_rows(pairing: Pairing, verdict: Verdict, settings: CompareSettings) -> list[dict[str, Any]]:
    rows = []
    for i, task in enumerate(pairing.task_ids):
        numbers = verdict.per_task.get(task, {})
        row: dict[str, Any] = {"task_id": task}
        for side, matrix in (("baseline", pairing.baseline), ("candidate", pairing.candidate)):
            values = matrix[i][~np.isnan(matrix[i])]
            passes = int(np.sum(values >= settings.success_threshold))
            row[f"{side}_band"] = band_of(passes, int(values.size))
            row[f"{side}_passes"] = f"{passes}/{values.size}"
        row.update(
            baseline=numbers.get("best"), candidate=numbers.get("candidate"), delta=numbers.get("delta")
        )
        rows.append(row)
    return rows


def _run_dict(run: ImportedRun) -> dict[str, Any]:
    return {
        "label": run.label,
        "path": str(run.path),
        "source": run.source,
        "tasks": len(run.task_ids),
        "outcomes": len(run.outcomes),
        "infra_errors": run.infra_errors,
        "notes": list(run.notes),
    }


def _pair_dict(result: PairResult) -> dict[str, Any]:
    verdict = result.verdict.to_dict()
    for key in ("per_task", "split", "null_spread", "null_spread_exact", "guards", "details", "footprint"):
        verdict.pop(key, None)
    pairing = result.pairing
    return {
        "candidate": _run_dict(result.candidate),
        **verdict,
        "level": float(result.level),
        "level_exact": str(result.level),
        "pairing": {
            "tasks": len(pairing.task_ids),
            "trials_by": pairing.trials_by,
            "seeds": pairing.seeds,
            "only_in_baseline": pairing.only_in_baseline,
            "only_in_candidate": pairing.only_in_candidate,
            "one_sided_trials": pairing.one_sided_trials,
            "clusters": len(set(pairing.clusters)) or None,
        },
        "band_moves": result.band_moves,
        "tasks": result.tasks,
    }
