"""Where a candidate fails, from its persisted rollouts: ``capevolve diagnose TAG``.

Free: reads the run dir's rollout files (the adapter's tasks only for ``--export``, to redact
gold). Per task, passes k/n and a band (``defect``, ``unstable``, ``solid``); infra errors
counted apart. Failing rollouts are grouped by a signature of the scorer's feedback, so one edit
can aim at one cluster; ``kept_good`` lists what an edit must not break. The sealed test split
is refused."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from .._decide.bands import DEFECT, MISSING, SOLID, UNSTABLE, band_of
from .._policy.booking.commit_checks import evaluating
from .._project.adapter import AdapterError, load_adapter, load_tasks
from .._project.microcase_gen import REDACTED, redact
from .._project.spec import Spec, to_stored
from .._project.splits import TEST_SPLIT
from .._project.way_on import shown
from .._store.rollouts.record import RolloutRecord
from .._store.rundir import RunDir, rollouts_of
from .._store.snapshots import unknown_tag
from ..exitcodes import Refusal

READABLE_SPLITS = ("val", "train")
_SIGNATURE_MAX = 240


class FailureCluster(TypedDict):
    """Rollouts whose feedback (or infra error) shares one signature, most frequent first."""

    signature: str
    count: int
    tasks: list[str]
    example_feedback: str
    example_rollout: str
    variants: NotRequired[list[str]]  # other phrasings of the same cause, merged in (paraphrase)


class TaskBand(TypedDict):
    """One task of the split: passes k of n valid trials, its band, its infra errors, and its rollout
    files by trial (named from the run's secret, so found here rather than by the tag)."""

    task_id: str
    passes: int
    trials: int
    band: str
    mean_reward: float | None
    infra_errors: int
    rollouts: list[str]


class InfraErrors(TypedDict):
    """The split's infra-error rollouts, counted apart: missing data, never a 0."""

    count: int
    note: str
    clusters: list[FailureCluster]


class ExportedReflective(TypedDict):
    """Where ``--export`` wrote the reflective dataset, and how many rows."""

    path: str
    rows: int
    gold: str


class SplitDiagnosis(TypedDict):
    """One split's diagnosis of a tag: bands, failure clusters, the solid tasks."""

    split: str
    tasks: list[TaskBand]
    bands: dict[str, int]
    failing_rollouts: int
    clusters: list[FailureCluster]
    infra_errors: InfraErrors
    kept_good: list[str]
    source: str


class Diagnosis(SplitDiagnosis):
    """The ``capevolve diagnose`` object: the run and tag, then the split's diagnosis;
    ``compare`` (keys named by the splits) with ``--compare-split``, ``export`` with ``--export``."""

    run_id: str
    tag: str
    compare: NotRequired[dict[str, Any]]
    export: NotRequired[ExportedReflective]


_QUOTED = re.compile(r"\"[^\"\n]*\"|(?<!\w)'[^'\n]*'(?!\w)|`[^`\n]*`|“[^”\n]*”|‘[^’\n]*’")
_HEX = re.compile(r"\b(?:0x)?[0-9a-fA-F]{8,}\b")
_MEASURE = re.compile(r"(?<![\w.])[0-9]+(?:[.,][0-9]+)*(?=[A-Za-z]+\b)")  # 3.5s, 12ms: a number, its unit
_ID = re.compile(r"(?<![\w-])(?=[\w-]*[0-9])(?=[\w-]*[A-Za-z])[\w-]+")
_NUMBER = re.compile(r"[-+]?(?<![\w.])[0-9]+(?:[.,][0-9]+)*")
_SPACE = re.compile(r"\s+")


# How failures are grouped (``--cluster``): ``normalized`` folds numbers and ids but keeps quoted
# text's words ('4 * 9' and '5 - 11' stay two defects); ``loose`` folds quoted text whole;
# ``exact`` groups identical feedback only.
CLUSTER_MODES = ("normalized", "loose", "exact")


def _fold(text: str) -> str:
    text = _HEX.sub("<id>", text)
    text = _MEASURE.sub("<n>", text)
    text = _ID.sub("<id>", text)
    return _NUMBER.sub("<n>", text)


def signature(feedback: Any, mode: str = "normalized") -> str:
    """A failure's cluster key under ``mode`` (:data:`CLUSTER_MODES`): the feedback with ids,
    numbers (``3.5s`` → ``<n>s``) and whitespace folded, inside quoted text too (``loose``:
    quoted text whole; ``exact``: whitespace only); "(no feedback)" when there is none."""
    if mode not in CLUSTER_MODES:
        raise Refusal(f"--cluster {mode!r}: use one of {', '.join(CLUSTER_MODES)}")
    text = feedback if isinstance(feedback, str) else json.dumps(feedback, sort_keys=True, default=repr)
    if mode == "loose":
        text = _fold(_QUOTED.sub("<str>", text))
    elif mode == "normalized":
        text = _fold(_QUOTED.sub(lambda quoted: _fold(quoted.group(0)), text))
    text = _SPACE.sub(" ", text).strip()
    if not text:
        return "(no feedback)"
    return text if len(text) <= _SIGNATURE_MAX else text[: _SIGNATURE_MAX - 1] + "…"


def _check_split(split: str, what: str) -> None:
    if split == TEST_SPLIT:
        raise Refusal(
            f"{what} test: the test split is sealed — scored once by finalize — and a diagnosis "
            "of it would steer the search with held-out data; diagnose val or train"
        )
    if split not in READABLE_SPLITS:
        raise Refusal(f"{what} {split!r}: not a split; use one of {', '.join(READABLE_SPLITS)}")


def _records(rundir: RunDir, tag: str, split: str, task_ids: list[str]) -> list[RolloutRecord]:
    """The tag's persisted rollouts on the split, in task order then trial; refused when none."""
    wanted = set(task_ids)
    found = [r for r in rundir.rollouts.indexed_rollouts(split, [tag]) if r.task_id in wanted]
    records = [
        full for r in found if (full := rundir.rollouts.read_rollout(split, r.task_id, r.tag, r.trial))
    ]
    if records:
        order = {t: i for i, t in enumerate(task_ids)}
        return sorted(records, key=lambda r: (order[r.task_id], r.trial))
    known = rundir.snapshots.known_tags()
    if tag not in known:
        raise Refusal(unknown_tag(tag, rundir.run_id, known, rundir.project_dir))
    evaluate = evaluating(rundir, tag, f"--capevolve-split {split}")  # the tag's own, not the best's
    raise Refusal(
        f"tag {tag!r} has no {split} rollouts in run {rundir.run_id}; evaluate it first ({evaluate})"
    )


def passed(record: RolloutRecord, threshold: float) -> bool:
    """The record's pass, else its reward against the threshold (an infra error never passes)."""
    if record.passed is not None:
        return bool(record.passed)
    return record.reward is not None and record.reward >= threshold


def _rollout_path(spec: Spec, rundir: RunDir, record: RolloutRecord) -> str:
    path = rundir.rollout_path(record.split, record.task_id, record.tag, record.trial)
    return to_stored(path, spec.project_dir)


def _clusters(
    spec: Spec, rundir: RunDir, records: Iterable[RolloutRecord], text_of: Any, mode: str
) -> list[FailureCluster]:
    clusters: dict[str, FailureCluster] = {}
    for record in records:
        key = signature(text_of(record), mode)
        if key not in clusters:
            example = _rollout_path(spec, rundir, record)
            clusters[key] = FailureCluster(
                signature=key, count=0, tasks=[], example_feedback=text_of(record), example_rollout=example
            )
        cluster = clusters[key]
        cluster["count"] += 1
        if record.task_id not in cluster["tasks"]:
            cluster["tasks"].append(record.task_id)
    merged = list(clusters.values()) if mode == "exact" else merge_paraphrases(list(clusters.values()))
    return sorted(merged, key=lambda c: (-c["count"], c["signature"]))


# Paraphrases of one cause are one cluster (but under ``exact``): signatures whose content-word
# stems overlap by a Jaccard index ≥ PARAPHRASE_OVERLAP and whose operators agree ('4 * 9' and
# '5 - 11' stay two defects), as cap-evolve's PR #381 merges them.
PARAPHRASE_OVERLAP = 0.6
_WORD = re.compile(r"[a-z]+(?:'t)?|[*/+=<>%^-]")
_PLACEHOLDER = re.compile(r"<(?:n|id|str)>")
_STOP = frozenset(
    "a an the of to in on at for by with from as into over under was were is are be been being it "
    "its this that these those and or but than then there their they he she we you i our your "
    "has have had do does did n id str".split()
)
_SUFFIXES = ("ingly", "edly", "ing", "ies", "ied", "es", "ed", "ly", "s", "e", "y")


def _stem(word: str) -> str:
    if word.endswith("n't"):
        return "not"
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def stems(text: str) -> frozenset[str]:
    """The content-word stems of a signature (and the operators in it): what paraphrases share."""
    plain = _PLACEHOLDER.sub(" ", text.lower())  # <n>, <id>, <str>: what folding left, not words
    return frozenset(
        _stem(w) for w in _WORD.findall(plain) if w not in _STOP and (len(w) > 1 or not w.isalpha())
    )


def merge_paraphrases(clusters: list[FailureCluster]) -> list[FailureCluster]:
    """Clusters whose :func:`stems` overlap by ≥ :data:`PARAPHRASE_OVERLAP` (Jaccard), merged
    transitively: the biggest names the cluster, the others are its ``variants``."""
    order = sorted(clusters, key=lambda c: (-c["count"], c["signature"]))
    words = [stems(c["signature"]) for c in order]
    parent = list(range(len(order)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(order)):
        for j in range(i + 1, len(order)):
            a, b = words[i], words[j]
            same_operators = {w for w in a if not w.isalpha()} == {w for w in b if not w.isalpha()}
            if a and b and same_operators and len(a & b) / len(a | b) >= PARAPHRASE_OVERLAP:
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(order)):
        groups.setdefault(root(i), []).append(i)
    out: list[FailureCluster] = []
    for members in groups.values():
        head = FailureCluster(**order[members[0]])  # a copy
        if len(members) > 1:
            tasks = list(head["tasks"])
            for m in members[1:]:
                head["count"] += order[m]["count"]
                tasks += [t for t in order[m]["tasks"] if t not in tasks]
            head["tasks"] = tasks
            head["variants"] = [order[m]["signature"] for m in members[1:]]
        out.append(head)
    return out


def _split_diagnosis(spec: Spec, rundir: RunDir, tag: str, split: str, cluster: str) -> SplitDiagnosis:
    task_ids = list((rundir.splits() or {}).get(split, []))
    if not task_ids:
        raise Refusal(f"the {split} split of run {rundir.run_id} has no tasks")
    records = _records(rundir, tag, split, task_ids)
    by_task: dict[str, list[RolloutRecord]] = {t: [] for t in task_ids}
    for record in records:
        by_task[record.task_id].append(record)
    tasks: list[TaskBand] = []
    for task_id, rows in by_task.items():
        valid = [r for r in rows if r.valid]
        k, n = sum(passed(r, spec.success_threshold) for r in valid), len(valid)
        mean = None if n == 0 else sum(float(r.reward or 0.0) for r in valid) / n
        tasks.append(
            TaskBand(
                task_id=task_id,
                passes=k,
                trials=n,
                band=band_of(k, n),
                mean_reward=mean,
                infra_errors=len(rows) - n,
                rollouts=[_rollout_path(spec, rundir, r) for r in sorted(rows, key=lambda r: r.trial)],
            )
        )
    failing = [r for r in records if r.valid and not passed(r, spec.success_threshold)]
    infra = [r for r in records if not r.valid]
    bands = {b: [t["task_id"] for t in tasks if t["band"] == b] for b in (DEFECT, UNSTABLE, SOLID, MISSING)}
    return {
        "split": split,
        "tasks": tasks,
        "bands": {b: len(ids) for b, ids in bands.items()},
        "failing_rollouts": len(failing),
        "clusters": _clusters(spec, rundir, failing, lambda r: r.feedback or "", cluster),
        "infra_errors": {
            "count": len(infra),
            "note": "missing data, never a 0: these rollouts did not measure the agent",
            "clusters": _clusters(spec, rundir, infra, lambda r: r.infra_error or "", cluster),
        },
        "kept_good": bands[SOLID],
        "source": rollouts_of(split, tag),
    }


def diagnose(
    spec: Spec,
    rundir: RunDir,
    tag: str,
    *,
    split: str = "val",
    compare_split: str | None = None,
    cluster: str = "normalized",
) -> Diagnosis:
    """The ``capevolve diagnose`` object: per-task bands, failure clusters and ``kept_good`` of
    ``tag`` on ``split``, and with ``compare_split`` the overlap of the two splits' clusters."""
    _check_split(split, "--split")
    signature("", cluster)  # an unknown mode is refused before anything is read
    report: Diagnosis = {
        "run_id": rundir.run_id,
        "tag": tag,
        **_split_diagnosis(spec, rundir, tag, split, cluster),
    }
    if compare_split is not None:
        _check_split(compare_split, "--compare-split")
        if compare_split == split:
            raise Refusal(
                f"--compare-split {compare_split}: that is the split being diagnosed; compare with another"
            )
        other = _split_diagnosis(spec, rundir, tag, compare_split, cluster)
        mine = {c["signature"] for c in report["clusters"]}
        theirs = {c["signature"] for c in other["clusters"]}
        shared = sorted(mine & theirs)
        note = (
            f"{len(shared)} failure signature(s) appear on both splits: an edit aimed at them on "
            f"{compare_split} can move the {split} mean"
            if shared
            else f"the {split} and {compare_split} failure clusters are disjoint: no edit driven by one "
            "split's failures can move the other's mean"
        )
        report["compare"] = {
            "split": compare_split,
            "clusters": [{k: c[k] for k in ("signature", "count", "tasks")} for c in other["clusters"]],
            "bands": other["bands"],
            "shared": shared,
            f"only_{split}": sorted(mine - theirs),
            f"only_{compare_split}": sorted(theirs - mine),
            "disjoint": not shared,
            "note": note,
        }
    return report


def _redacted(value: Any, gold: Any) -> Any:
    """``value`` with the gold answer redacted in every string (and a scalar equal to it)."""
    if isinstance(value, str):
        return redact(value, gold)
    if isinstance(value, dict):
        return {k: _redacted(v, gold) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v, gold) for v in value]
    if gold is not None and not isinstance(value, bool) and value is not None and value == gold:
        return REDACTED
    return value


def export_reflective(
    spec: Spec, rundir: RunDir, tag: str, out: Path, *, split: str = "val"
) -> ExportedReflective:
    """Write the reflective dataset an optimizer reads: one JSON line per failing rollout of
    ``tag`` on ``split``, the gold answer redacted; refused inside the capability folder."""
    _check_split(split, "--split")
    records = _records(rundir, tag, split, list((rundir.splits() or {}).get(split, [])))
    target = out.resolve()
    capability = spec.capability_path.resolve()
    if target.is_relative_to(capability):
        raise Refusal(f"--export {out}: inside the capability folder {capability}, where a candidate reads")
    try:
        pool = load_tasks(load_adapter(spec.adapter, spec.project_dir), spec.adapter)
    except AdapterError as exc:
        raise Refusal(f"--export needs the adapter's tasks to redact gold answers: {exc}") from None
    lines = []
    for record in records:
        if not record.valid or passed(record, spec.success_threshold):
            continue
        task = pool.get(record.task_id)
        gold = None if task is None else task.target
        row = {
            "split": record.split,
            "tag": record.tag,
            "task_id": record.task_id,
            "trial": record.trial,
            "input": _redacted(record.input, gold),
            "output": _redacted(record.output, gold),
            "feedback": _redacted(record.feedback, gold),
            "reward": record.reward,
            "signature": signature(_redacted(record.feedback, gold)),
            "rollout": _rollout_path(spec, rundir, record),
        }
        lines.append(json.dumps(row, sort_keys=True, ensure_ascii=False, default=repr))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return {"path": str(target), "rows": len(lines), "gold": "redacted"}


def render_table(report: dict[str, Any], project_dir: Path | None = None) -> list[str]:
    """A short human view of :func:`diagnose` (``capevolve diagnose --table``); each example rollout
    named from the current folder when ``project_dir`` is given (the JSON keeps the project's path:
    from the repository root, the README's place, the project's own did not open)."""
    b = report["bands"]
    lines = [
        f"capevolve diagnose {report['tag']!r} on {report['split']} — run {report['run_id']}",
        f"tasks: {b['solid']} solid, {b['unstable']} unstable, {b['defect']} defect"
        + (f", {b['missing']} missing" if b["missing"] else "")
        + f"; {report['failing_rollouts']} failing rollouts; {report['infra_errors']['count']} infra errors",
        "",
        f"{'count':>6}  {'tasks':>5}  signature",
    ]
    for c in report["clusters"]:
        example = (
            shown(project_dir / c["example_rollout"]) if project_dir is not None else c["example_rollout"]
        )
        lines.append(f"{c['count']:>6}  {len(c['tasks']):>5}  {c['signature']}   e.g. {example}")
    for c in report["infra_errors"]["clusters"]:
        lines.append(f"{c['count']:>6}  {len(c['tasks']):>5}  INFRA {c['signature']}")
    unstable = [t["task_id"] for t in report["tasks"] if t["band"] == UNSTABLE]
    defect = [t["task_id"] for t in report["tasks"] if t["band"] == DEFECT]
    lines += ["", f"defect: {' '.join(defect) or '—'}", f"unstable: {' '.join(unstable) or '—'}"]
    lines.append(f"kept_good (do not break): {' '.join(report['kept_good']) or '—'}")
    if "compare" in report:
        cmp = report["compare"]
        lines.append(f"vs {cmp['split']}: {len(cmp['shared'])} shared signature(s) — {cmp['note']}")
    if "export" in report:
        lines.append(
            f"exported {report['export']['rows']} rows to {report['export']['path']} (gold redacted)"
        )
    return lines
