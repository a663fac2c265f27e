"""Two finished runs made into the gate's reward matrices, paired by task.

Rows are the tasks either run names; columns are trials, by the files' own trial labels when
both runs have them, else by position. A missing or errored trial is ``nan`` (missing data),
and a task missing from one run lowers the paired coverage."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .results import ImportedRun, Outcome, ResultsError

COMMON, DIFFER, NOT_SHOWN = "common", "differ", "not shown"


@dataclass(frozen=True)
class Pairing:
    """The baseline and one candidate as tasks × trials matrices on the same rows."""

    task_ids: list[str]
    baseline: np.ndarray
    candidate: np.ndarray
    trials_by: str  # "label" or "position"
    seeds: str  # COMMON, DIFFER or NOT_SHOWN, over the trials measured in both runs
    # the gate's keys, candidate and best: errored trials, and trials the other run measured that
    # this one has no row for (missing data either way)
    infra_errors: dict[str, int] = field(default_factory=dict)
    only_in_baseline: list[str] = field(default_factory=list)
    only_in_candidate: list[str] = field(default_factory=list)
    one_sided_trials: int = 0  # trials of a shared task measured in one run only
    # of ``infra_errors``, the trials this run's file has no row for (the other measured them): not
    # errors the tool logged, so said apart from them, but weighed the same (a row left out of a
    # file could have been left out for its reward)
    lacking: dict[str, int] = field(default_factory=dict)
    rows_in_one_file: int = 0  # (shared task, trial) rows one file has and the other has not
    # per side, its trials a task where every shared task has as many (else None)
    trials_a_task: dict[str, int | None] = field(default_factory=dict)
    # a shared task whose trials both files label, as many on each side, under labels that differ
    # (``0 1 2`` against ``1 2 3``): its task id and each side's labels, else None
    labels_differ: tuple[str, list[str], list[str]] | None = None
    clusters: tuple[str, ...] = ()  # each row's cluster (empty: every task its own)


def _trial_keys(run: ImportedRun, by_label: bool) -> dict[str, dict[str, Outcome]]:
    keyed: dict[str, dict[str, Outcome]] = {}
    for outcome in run.outcomes:
        trials = keyed.setdefault(outcome.task_id, {})
        key = outcome.trial if by_label and outcome.trial is not None else str(len(trials) + 1)
        trials[key] = outcome
    return keyed


def _order(keys: set[str]) -> list[str]:
    """Trial keys in their natural order: numbers as numbers, then the rest as text."""
    return sorted(keys, key=lambda k: (0, int(k), "") if k.lstrip("-").isdigit() else (1, 0, k))


def pair(
    baseline: ImportedRun, candidate: ImportedRun, cluster_map: Mapping[str, str] | None = None
) -> Pairing:
    """The two runs on the same task rows and trial columns; each row's cluster from
    ``cluster_map`` (``--clusters FILE``), else the files' ``cluster`` column, else none."""
    _check_same_tasks(baseline, candidate)
    by_label = all(o.trial is not None for run in (baseline, candidate) for o in run.outcomes)
    base, cand = _trial_keys(baseline, by_label), _trial_keys(candidate, by_label)
    task_ids = list(dict.fromkeys([*base, *cand]))
    columns = _order({k for side in (base, cand) for trials in side.values() for k in trials})
    matrices, errors = zip(*(_matrix(keyed, task_ids, columns) for keyed in (base, cand)), strict=True)
    # a trial one run measured and the other has no row for is missing data like an errored one,
    # counted with the errors so the gate's worst-case imputation weighs it
    lacking = [_lacking(base, cand), _lacking(cand, base)]
    errors = tuple(e + n for e, n in zip(errors, lacking, strict=True))
    seeds, one_sided, one_file = _shared_rows(base, cand)
    return Pairing(
        task_ids=task_ids,
        baseline=matrices[0],
        candidate=matrices[1],
        trials_by="label" if by_label else "position",
        seeds=_seed_agreement(seeds),
        infra_errors={"candidate": errors[1], "best": errors[0]},
        only_in_baseline=[t for t in base if t not in cand],
        only_in_candidate=[t for t in cand if t not in base],
        one_sided_trials=one_sided,
        lacking={"candidate": lacking[1], "best": lacking[0]},
        rows_in_one_file=one_file,
        trials_a_task={"candidate": _trials_a_task(cand, base), "best": _trials_a_task(base, cand)},
        labels_differ=_labels_differ(base, cand) if by_label else None,
        clusters=_clusters(task_ids, (baseline, candidate), cluster_map),
    )


Keyed = dict[str, dict[str, Outcome]]


def _matrix(keyed: Keyed, task_ids: list[str], columns: list[str]) -> tuple[np.ndarray, int]:
    """One run's rewards as a task × trial matrix (NaN where it has none), and its errored trials."""
    where = {k: j for j, k in enumerate(columns)}
    matrix, errored = np.full((len(task_ids), len(columns)), np.nan), 0
    for i, task in enumerate(task_ids):
        for key, outcome in keyed.get(task, {}).items():
            if outcome.reward is None:
                errored += 1
            else:
                matrix[i, where[key]] = outcome.reward
    return matrix, errored


def _lacking(mine: Keyed, other: Keyed) -> int:
    """The trials ``other`` measured that ``mine`` has no row for."""
    return sum(
        key not in mine.get(task, {}) and outcome.reward is not None
        for task, trials in other.items()
        for key, outcome in trials.items()
    )


def _shared_rows(base: Keyed, cand: Keyed) -> tuple[list[tuple[str | None, str | None]], int, int]:
    """On the tasks both runs name: the seed pairs of the trials both measured, the trials only one
    measured, the trials only one file has a row for."""
    seeds: list[tuple[str | None, str | None]] = []
    one_sided = one_file = 0
    for task in set(base) & set(cand):
        for key in set(base[task]) | set(cand[task]):
            a, b = base[task].get(key), cand[task].get(key)
            one_file += (a is None) != (b is None)
            measured = [o for o in (a, b) if o is not None and o.reward is not None]
            if len(measured) == 1:
                one_sided += 1
            elif len(measured) == 2 and a is not None and b is not None:
                seeds.append((a.seed, b.seed))
    return seeds, one_sided, one_file


def _check_same_tasks(baseline: ImportedRun, candidate: ImportedRun) -> None:
    """Refused: a task id that names one task in the baseline's file and another in the
    candidate's, where both files record what the task is (lm-eval's ``doc_id`` is a position in
    the dataset, inspect numbers unnamed samples: two tasks or two versions of a dataset share
    ids). Paired, they would give a verdict on tasks that were never run twice."""
    contents: list[dict[str, str]] = [{}, {}]
    for known, run in zip(contents, (baseline, candidate), strict=True):
        for outcome in run.outcomes:
            if outcome.content:
                known.setdefault(outcome.task_id, outcome.content)
    shared = [t for t in contents[0] if t in contents[1]]
    differ = [t for t in shared if contents[0][t] != contents[1][t]]
    if differ:
        raise ResultsError(
            f"task {differ[0]!r} is not the same task in {baseline.path} and {candidate.path}: what the "
            f"files record of it differs ({len(differ)} of {len(shared)} shared ids so); they hold different "
            "tasks (another task, dataset version or order) under the same ids — compare runs of the same "
            "tasks (if they are the same, export both as a CSV of task_id, trial, reward)"
        )


def _trials_a_task(mine: dict[str, dict[str, Outcome]], other: dict[str, dict[str, Outcome]]) -> int | None:
    """How many trials (rows) this run has for each task both runs name, where that is one number."""
    counts = {len(trials) for task, trials in mine.items() if task in other}
    return counts.pop() if len(counts) == 1 else None


def _labels_differ(
    base: dict[str, dict[str, Outcome]], cand: dict[str, dict[str, Outcome]]
) -> tuple[str, list[str], list[str]] | None:
    """The first shared task whose files give it as many trials under other labels: the mark of one
    file numbering its trials from 0 and the other from 1, which pairs a trial with none and leaves
    it missing on both sides. Said, not mended: the labels may name different trials."""
    for task in base:
        mine, other = base[task], cand.get(task)
        if other is not None and len(mine) == len(other) and set(mine) != set(other):
            return task, _order(set(mine)), _order(set(other))
    return None


def _clusters(
    task_ids: list[str], runs: tuple[ImportedRun, ...], cluster_map: Mapping[str, str] | None
) -> tuple[str, ...]:
    """Every row's cluster, or () when nothing names one; refused when only some tasks have
    one, or a task has two (a cluster must hold the same tasks in both runs)."""
    if cluster_map is not None:
        missing = [t for t in task_ids if t not in cluster_map]
        if missing:
            raise ResultsError(
                f"the clusters file names no cluster for task {missing[0]!r} ({len(missing)} such); "
                f"give every task of the runs a line `task_id,cluster`: a task that shares no source "
                f"is a cluster of its own (`{missing[0]},{missing[0]}`)"
            )
        return tuple(cluster_map[t] for t in task_ids)
    found: dict[str, str] = {}
    baseline_tasks = set(runs[0].task_ids)
    for run in runs:
        for outcome in run.outcomes:
            if outcome.cluster is None:
                continue
            if run is not runs[0] and outcome.task_id in baseline_tasks and outcome.task_id not in found:
                raise _unfixed_cluster(run, outcome)
            if found.setdefault(outcome.task_id, outcome.cluster) != outcome.cluster:
                raise ResultsError(
                    f"{run.path}: task {outcome.task_id!r} is in cluster {outcome.cluster!r} here and "
                    f"{found[outcome.task_id]!r} before; a task has one cluster in every run"
                )
    if not found:
        return ()
    missing = [t for t in task_ids if t not in found]
    if missing:
        raise ResultsError(
            f"task {missing[0]!r} has no cluster while others have one ({len(missing)} such); give every "
            "task a cluster (or none), or give them all with --clusters FILE"
        )
    return tuple(found[t] for t in task_ids)


def _unfixed_cluster(run: ImportedRun, outcome: Outcome) -> ResultsError:
    """A candidate's cluster for a task the baseline's file left unclustered: written with the
    results it groups, it could be chosen after them (a loss in a cluster with a win each turned
    a p = 0.19 no-op into an accept), so it is not taken."""
    return ResultsError(
        f"{run.path}: task {outcome.task_id!r} is in cluster {outcome.cluster!r} here but in none in "
        "the baseline's file; clusters are fixed before the results, so a run's own cluster column is "
        "read only where the baseline's names the same: give the cluster column in the baseline's "
        "file too, or the clusters of both runs with --clusters FILE"
    )


def _seed_agreement(pairs: list[tuple[str | None, str | None]]) -> str:
    """COMMON when every trial measured in both runs shows the same seed in both, DIFFER when
    one shows two different seeds, else NOT_SHOWN (a file that records no seed cannot say)."""
    if any(a is not None and b is not None and a != b for a, b in pairs):
        return DIFFER
    if pairs and all(a is not None and a == b for a, b in pairs):
        return COMMON
    return NOT_SHOWN
