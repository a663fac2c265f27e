"""deepeval's test-run results: ``.deepeval/.latest_test_run.json`` or a ``test_run_*.json`` in
``DEEPEVAL_RESULTS_FOLDER``.

Each test case is a task (its ``name``) with one trial. The reward is one metric's ``score``
(``--scorer "Answer Relevancy"``; default the first) or pass/fail (``--scorer success``); an
errored metric is missing data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .results import (
    LOG_RESCALE,
    ImportedRun,
    Outcome,
    ReadOptions,
    ResultsError,
    checked_reward,
    json_document,
    made_run,
)


def looks_like_deepeval(path: Path, head: Any) -> bool:
    return (
        path.suffix.lower() == ".json" and isinstance(head, dict) and isinstance(head.get("testCases"), list)
    )


def read_deepeval(path: Path, head: Any, options: ReadOptions) -> ImportedRun:
    head = head or json_document(path)
    cases = head.get("testCases") if isinstance(head, dict) else None
    if not isinstance(cases, list):
        raise ResultsError(f"{path}: no testCases list; is it a deepeval test run's JSON?")
    first_metrics = next((c.get("metricsData") or [] for c in cases if c.get("metricsData")), [])
    metric = options.scorer or (first_metrics[0].get("name") if first_metrics else "success")
    outcomes: list[Outcome] = []
    for position, case in enumerate(cases):
        task = str(case.get("name") or f"test_case_{case.get('order', position)}")
        content = json.dumps([case.get("input"), case.get("expectedOutput")], sort_keys=True, default=str)
        where = f"{path}: test case {task}"
        if metric == "success":
            outcomes.append(
                Outcome(task, None, checked_reward(bool(case.get("success")), where), content=content)
            )
            continue
        data = {m.get("name"): m for m in case.get("metricsData") or []}
        found = data.get(metric)
        if found is None:
            raise ResultsError(
                f"{where}: no metric {metric!r} (its metrics: {', '.join(map(str, data)) or 'none'}); "
                "--scorer takes a metric name, or success"
            )
        if found.get("error") or found.get("score") is None:
            outcomes.append(Outcome(task, None, None, str(found.get("error") or "no score"), content=content))
            continue
        outcomes.append(
            Outcome(task, None, checked_reward(found["score"], where, LOG_RESCALE), content=content)
        )
    names = [m.get("name") for m in first_metrics]
    notes = [f"metric {metric}"]
    if len(names) > 1:
        notes.append(f"the cases' metrics: {', '.join(map(str, names))} (--scorer picks another)")
    return made_run(path, "deepeval", options.label, outcomes, notes)
