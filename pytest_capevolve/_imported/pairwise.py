"""Pairwise judging read from a table: ``capevolve compare --pairwise prefs.csv``.

Each row a judgement, A / B / tie (an empty one or an error is missing data, never a tie);
each task's net preference goes to the exact sign test (:mod:`.._stats.pairwise`), by cluster
where given."""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._stats.pairwise import PREFERENCES, SignTest, net_preference, sign_test, unit_nets
from .results import ResultsError
from .table import TASK_COLUMNS, TRIAL_COLUMNS, cell, column, column_names, table_rows

PREFERENCE_COLUMNS = ("preference", "winner")
ORDERS = ("AB", "BA")


@dataclass(frozen=True)
class Judgement:
    """One trial of one task: the judge's preference (None: the judge failed, missing data),
    the order shown (None: not recorded), the task's cluster."""

    task_id: str
    preference: str | None
    order: str | None = None
    cluster: str | None = None


@dataclass
class PairwiseComparison:
    """The answer for one preferences file: every number behind the decision."""

    path: Path
    labels: tuple[str, str]
    judgements: list[Judgement]
    alpha: float
    min_coverage: float
    test: SignTest = field(init=False)
    # each failed judgement counted as A preferred: a candidate can make the judge fail on the
    # tasks it would lose (an output its reply parser chokes on)
    worst: SignTest = field(init=False)
    by: str = field(init=False)
    decision: str = field(init=False)
    reason: str = field(init=False)

    def __post_init__(self) -> None:
        clusters = {j.task_id: j.cluster for j in self.judgements if j.cluster is not None}
        self.by = "cluster" if clusters else "task"
        self.test = sign_test(unit_nets(self.task_nets, clusters))
        self.worst = sign_test(unit_nets(self._nets(failed_as="A"), clusters))
        self.decision, self.reason = _decision(self)

    @property
    def task_ids(self) -> list[str]:
        return list(dict.fromkeys(j.task_id for j in self.judgements))

    @property
    def task_nets(self) -> dict[str, int]:
        """Net preference of each task with at least one judgement that did not fail."""
        return self._nets(failed_as=None)

    def _nets(self, failed_as: str | None) -> dict[str, int]:
        said: defaultdict[str, list[str]] = defaultdict(list)
        for j in self.judgements:
            if (preference := j.preference or failed_as) is not None:
                said[j.task_id].append(preference)
        return {task: net_preference(prefs) for task, prefs in said.items()}

    @property
    def coverage(self) -> float:
        return len(self.task_nets) / len(self.task_ids)

    @property
    def counts(self) -> dict[str, int]:
        """Judgements by outcome: A, B, tie, and errored."""
        counted = Counter(j.preference or "errored" for j in self.judgements)
        return {key: counted.get(key, 0) for key in (*PREFERENCES, "errored")}

    @property
    def position(self) -> dict[str, int] | None:
        """How often the output shown first won, of the judgements that named a winner and
        recorded the order (None without an order column): the judge's lean to a position."""
        shown = [j for j in self.judgements if j.order and j.preference in ("A", "B")]
        if not shown:
            return None
        first = sum(j.preference == j.order[0] for j in shown if j.order)
        return {"first_won": first, "decisive": len(shown)}

    @property
    def decisions(self) -> list[str]:
        return [self.decision]

    @property
    def accepted(self) -> bool:
        return self.decision == "accept"

    def promises(self) -> dict[str, list[str]]:
        """What holds for these preferences, and what does not — said in every answer."""
        holds = [
            "the test is an exact sign test (scipy's binomtest) over the "
            f"{self.by}s whose net preference is not zero; its false-accept rate is at most α when, "
            "under no difference, A and B are exchangeable: the order shown drawn at random or "
            "balanced per task",
            f"ties are counted and reported: {self.counts['tie']} tied judgements, {self.test.ties} "
            f"{self.by}s with a net of zero (they carry no sign, so they are not tested)",
            "a judgement that failed is missing data, never a tie; coverage below "
            f"{self.min_coverage:.0%} is indecisive, and so is an accept the failed judgements "
            f"could flip (each counted as {self.labels[0]} preferred)",
        ]
        not_hold = [
            "the judge is the instrument: a preference measures what the judge prefers, not a reward; "
            "its errors and leanings (length, style) are in the answer",
            "nothing is sealed, and how the outputs were chosen is unknown: α covers this comparison, "
            "not the best of many tried",
        ]
        if self.position is None:
            not_hold.append(
                "the order the outputs were shown in is not recorded: a judge that leans to a position "
                "biases the test unless the order was drawn at random; add an order column (AB / BA)"
            )
        if self.by == "task":
            not_hold.append(
                "tasks are taken as independent; if several share a source, give a cluster column "
                "(or --clusters FILE) so the test counts whole clusters"
            )
        return {"hold": holds, "do_not_hold": not_hold}

    def to_dict(self) -> dict[str, Any]:
        t = self.test
        return {
            "pairwise": str(self.path),
            "a": self.labels[0],
            "b": self.labels[1],
            "alpha": self.alpha,
            "min_coverage": self.min_coverage,
            "decision": self.decision,
            "reason": self.reason,
            "test": "sign",
            "by": self.by,
            "wins_b": t.wins_b,
            "wins_a": t.wins_a,
            "ties": t.ties,
            "win_rate": t.win_rate,
            "ci": list(t.ci) if t.ci else None,
            "p_value": t.p_greater,
            "p_less": t.p_less,
            "p_two_sided": t.p_two_sided,
            "tasks": len(self.task_ids),
            "coverage": self.coverage,
            "judgements": self.counts,
            "position": self.position,
            "task_nets": self.task_nets,
            "promises": self.promises(),
        }


def _decision(result: PairwiseComparison) -> tuple[str, str]:
    t, a, b = result.test, *result.labels
    units = f"{result.by}s"
    counted = (
        f"{b} preferred on {t.wins_b} {units}, {a} on {t.wins_a}, {t.ties} tied (net zero, not "
        f"tested); sign test p = {t.p_greater:.4g} (one-sided), {t.p_two_sided:.4g} (two-sided)"
    )
    if result.coverage < result.min_coverage:
        return "indecisive", (
            f"judged on {result.coverage:.0%} of {len(result.task_ids)} tasks, below min coverage "
            f"{result.min_coverage:.0%}: judge the tasks whose judgements failed again; {counted}"
        )
    failed = result.counts["errored"]
    if t.p_greater <= result.alpha and failed and result.worst.p_greater > result.alpha:
        return "indecisive", (
            f"{failed} failed judgement(s) could flip the decision (each counted as {a} preferred, "
            f"p = {result.worst.p_greater:.4g}): judge them again, mending what made the judge fail; "
            f"{counted}"
        )
    if t.p_greater <= result.alpha:
        return "accept", f"{b} preferred to {a} at α = {result.alpha:g}: {counted}"
    if t.p_less <= result.alpha:
        return "reject", f"{a} preferred to {b} at α = {result.alpha:g}: {counted}"
    return "reject", f"{b} not shown preferred to {a} at α = {result.alpha:g}: {counted}"


def looks_pairwise(path: Path) -> bool:
    """A CSV / JSONL whose columns include a preference (or winner) column."""
    if path.suffix.lower() not in (".csv", ".jsonl", ".ndjson") or not path.is_file():
        return False
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            if path.suffix.lower() == ".csv":
                names = list(csv.DictReader(handle).fieldnames or [])
            else:  # the first object's keys: a reward table is not read whole to be told apart
                first = next((line for line in handle if line.strip()), "{}")
                names = list(json.loads(first)) if first.lstrip().startswith("{") else []
    except (UnicodeDecodeError, json.JSONDecodeError, csv.Error):
        return False
    return column(names, PREFERENCE_COLUMNS) is not None


def read_judgements(path: Path) -> list[Judgement]:
    """The file's judgements, refused (naming the file, the row and a way on) where a value is
    not one this test can read, or a task was shown in one order only."""
    if not path.is_file():
        raise ResultsError(f"no such preferences file: {path}")
    rows = table_rows(path)
    names = column_names(rows)
    task_col, pref_col = column(names, TASK_COLUMNS), column(names, PREFERENCE_COLUMNS)
    if task_col is None or pref_col is None:
        raise ResultsError(
            f"{path}: a preferences file has the columns task_id and preference (A, B or tie), "
            f"optionally trial, order, cluster, error; found {names}"
        )
    order_col, cluster_col = column(names, ("order",)), column(names, ("cluster",))
    error_col = column(names, ("error",))

    def judgement(row: dict[str, Any], where: str) -> Judgement:
        task = cell(row, task_col)
        if task is None:
            raise ResultsError(f"{where}: no task id; every row names its task")
        error, value = cell(row, error_col), cell(row, pref_col)
        if error is not None or value is None:
            preference = None
        else:
            preference = {"a": "A", "b": "B", "tie": "tie"}.get(value.lower())
            if preference is None:
                raise ResultsError(
                    f"{where}: preference {value!r} is not A, B or tie; write A where the first run's "
                    "output is better, B where the second's is, tie where neither is, and leave it "
                    "empty (or fill the error column) where the judge failed: missing data, not a tie"
                )
        order = cell(row, order_col)
        if order is not None and order.upper() not in ORDERS:
            raise ResultsError(
                f"{where}: order {order!r} is not AB or BA; write AB where A's output was shown first, "
                "BA where B's was, or drop the order column"
            )
        return Judgement(task, preference, order.upper() if order else None, cell(row, cluster_col))

    first_line = 1 if path.suffix.lower() != ".csv" else 2
    judgements = [judgement(row, f"{path}:{first_line + i}") for i, row in enumerate(rows)]
    if not judgements:
        raise ResultsError(f"{path}: no judgements in it; is it the right file?")
    if order_col is not None:
        _check_both_orders(path, judgements)
    clusters: dict[str, str] = {}
    for j in judgements:
        if j.cluster is not None and clusters.setdefault(j.task_id, j.cluster) != j.cluster:
            raise ResultsError(
                f"{path}: task {j.task_id!r} is in two clusters ({clusters[j.task_id]!r}, "
                f"{j.cluster!r}); give each task one cluster on every row"
            )
    trial_col = column(names, TRIAL_COLUMNS)
    if trial_col is not None:
        _check_trials_once(path, rows, task_col, trial_col, order_col)
    return judgements


def _check_both_orders(path: Path, judgements: list[Judgement]) -> None:
    """Where the order is recorded, every judged task was shown as many times each way, so a
    judge leaning to a position leans as much for A as for B and the sign test stays exact."""
    orders: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for j in judgements:
        if j.preference is not None:
            orders[j.task_id][j.order or "?"] += 1
    one_way = [task for task, seen in orders.items() if len(set(seen) - {"?"}) < 2]
    uneven = [task for task, seen in orders.items() if task not in one_way and seen["AB"] != seen["BA"]]
    for tasks, said, again in (
        (one_way, "in one order only", "again with the two outputs swapped (order BA where it was AB)"),
        (uneven, "more often in one order", "as many times in each order (order BA as often as AB)"),
    ):
        if tasks:
            shown = ", ".join(repr(t) for t in tasks[:3]) + (", …" if len(tasks) > 3 else "")
            raise ResultsError(
                f"{path}: {len(tasks)} task(s) judged {said} ({shown}); a judge's lean to the first "
                f"or second output would then count as a preference. Judge each such task {again}; "
                "only where the order shown was drawn at random for each judgement, drop the order column "
                "(a fixed order must be judged again swapped: dropping the column would hide the lean, "
                "not remove it)"
            )


def _check_trials_once(
    path: Path, rows: list[dict[str, Any]], task_col: str, trial_col: str, order_col: str | None
) -> None:
    """Each (task, trial) once, or once in each order where the order is recorded."""
    seen: set[tuple[str | None, str, str | None]] = set()
    for row in rows:
        trial = cell(row, trial_col)
        if trial is None:
            continue
        order = cell(row, order_col)
        key = (cell(row, task_col), trial, order.upper() if order else None)
        if key in seen:
            shown = f" in order {key[2]}" if key[2] else ""
            raise ResultsError(
                f"{path}: task {key[0]!r} has trial {trial!r} twice{shown}; each (task, trial) once"
                f"{' per order' if order_col else ''} — give repeated judgements distinct trial numbers"
            )
        seen.add(key)


def compare_pairwise(
    path: Path,
    *,
    alpha: float = 0.05,
    min_coverage: float = 0.8,
    labels: tuple[str | None, str | None] = (None, None),
    clusters: dict[str, str] | None = None,
) -> PairwiseComparison:
    """Read ``path`` and decide: what ``capevolve compare --pairwise`` does. ``clusters``
    (``--clusters FILE``) gives a cluster to tasks the file's own column does not."""
    given = clusters or {}
    judgements = [replace(j, cluster=j.cluster or given.get(j.task_id)) for j in read_judgements(Path(path))]
    named = (labels[0] or "A", labels[1] or "B")
    return PairwiseComparison(Path(path), named, judgements, alpha, min_coverage)
