"""lm-evaluation-harness per-sample logs: ``samples_<task>_<time>.jsonl``, written by
``lm_eval … --log_samples --output_path DIR``.

Each line is one document (a task, id ``doc_id``, one trial) under one filter. The reward is one
metric under one filter (``--scorer acc`` or ``--scorer exact_match,strict-match``; default the
file's first), whose values must lie in [0, 1]; perplexity or BLEU is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .results import LOG_RESCALE, ImportedRun, Outcome, ReadOptions, ResultsError, checked_reward, made_run


def looks_like_lm_eval(path: Path, head: Any) -> bool:
    """A ``samples_*.jsonl`` file, or a JSONL whose first line has ``doc_id`` and ``metrics``."""
    if path.suffix.lower() != ".jsonl":
        return False
    if path.name.startswith("samples_"):
        return True
    return isinstance(head, dict) and "doc_id" in head and "metrics" in head


def read_lm_eval(path: Path, head: Any, options: ReadOptions) -> ImportedRun:
    lines = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if text.strip():
            try:
                lines.append((number, json.loads(text)))
            except json.JSONDecodeError as exc:
                raise ResultsError(
                    f"{path}:{number}: not JSON ({exc.msg}); is it lm-eval's samples file?"
                ) from None
    if not lines:
        raise ResultsError(f"{path}: no samples in it; lm-eval writes them with --log_samples")
    filters = list(dict.fromkeys(str(row.get("filter", "none")) for _, row in lines))
    metric, _, wanted_filter = (options.scorer or "").partition(",")
    first = lines[0][1]
    metric = metric or next(iter(first.get("metrics") or []), "")
    chosen_filter = wanted_filter or filters[0]
    if chosen_filter not in filters:
        raise ResultsError(f"{path}: no filter {chosen_filter!r}; its filters: {', '.join(filters)}")
    outcomes: list[Outcome] = []
    for number, row in lines:
        if str(row.get("filter", "none")) != chosen_filter:
            continue
        where = f"{path}:{number}"
        if "doc_id" not in row:
            raise ResultsError(f"{where}: no doc_id; is it lm-eval's samples file?")
        if metric not in row:
            names = ", ".join(row.get("metrics") or []) or "none"
            raise ResultsError(
                f"{where}: no metric {metric!r} (its metrics: {names}); name one with --scorer "
                "METRIC or --scorer METRIC,FILTER"
            )
        content = str(row["doc_hash"]) if row.get("doc_hash") else None  # lm-eval's hash of the document
        outcomes.append(
            Outcome(
                str(row["doc_id"]),
                None,
                checked_reward(_value(row[metric]), where, LOG_RESCALE),
                content=content,
            )
        )
    notes = [f"metric {metric}, filter {chosen_filter}"]
    if len(filters) > 1:
        notes.append(f"the file's filters: {', '.join(filters)} (--scorer {metric},FILTER picks another)")
    seen: set[str] = set()
    for outcome in outcomes:
        if outcome.task_id in seen:
            raise ResultsError(
                f"{path}: doc_id {outcome.task_id} appears twice under one filter; give one task's "
                "samples file per run (lm-eval writes one per task)"
            )
        seen.add(outcome.task_id)
    return made_run(path, "lm_eval", options.label, outcomes, notes)


def _value(value: Any) -> Any:
    """A metric's value: lm-eval logs some as a one-element list (``[1.0]``)."""
    return value[0] if isinstance(value, list) and len(value) == 1 else value
