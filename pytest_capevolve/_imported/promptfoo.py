"""promptfoo's output: ``promptfoo eval -o results.json`` (or ``-o results.jsonl``, its rows a line each).

Each row of ``results.results`` is one (prompt, provider, test): a test is a task (its
``description``, else its ``vars``), a ``--repeat`` a trial paired by position. The reward is
the row's ``score``, a ``namedScores`` entry (``--scorer NAME``) or pass/fail (``--scorer
success``); an errored row is missing data, a failed assertion a measured failure. A file of
several prompts or providers is refused unless ``--arm`` names one
(``capevolve compare r.json r.json --arm A --arm B`` compares its arms)."""

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

ERROR = 2  # promptfoo's ResultFailureReason.ERROR (0 none, 1 an assertion failed)


def looks_like_promptfoo(path: Path, head: Any) -> bool:
    """``-o results.json`` (the eval's document), or ``-o results.jsonl`` (a row a line: its
    first row has a ``testCase`` and a ``promptIdx``)."""
    if path.suffix.lower() == ".jsonl":
        return isinstance(head, dict) and "testCase" in head and "promptIdx" in head
    if path.suffix.lower() != ".json":
        return False
    return isinstance(head, dict) and "evalId" in head or _rows(head) is not None


def _rows(head: Any) -> list[Any] | None:
    results = head.get("results") if isinstance(head, dict) else None
    if isinstance(results, dict) and isinstance(results.get("results"), list):
        return list(results["results"])
    return None


def arm_of(row: dict[str, Any]) -> str:
    """A row's arm as people name it: provider (id or label), then the prompt's label."""
    provider = row.get("provider") or {}
    prompt = row.get("prompt") or {}
    name = provider.get("label") or provider.get("id") if isinstance(provider, dict) else str(provider)
    prompt_name = prompt.get("label") if isinstance(prompt, dict) else None
    return f"{name} | {prompt_name}" if prompt_name else str(name)


def read_promptfoo(path: Path, head: Any, options: ReadOptions) -> ImportedRun:
    jsonl = path.suffix.lower() == ".jsonl"
    rows = _jsonl_rows(path) if jsonl else _rows(head or json_document(path))
    label, scorer, arm = options.label, options.scorer, options.arm
    if rows is None:
        raise ResultsError(f"{path}: no results.results list; is it `promptfoo eval -o results.json` output?")
    arms = list(dict.fromkeys(arm_of(r) for r in rows))
    if arm is not None:
        rows = [r for r in rows if arm in (arm_of(r), *_arm_names(r))]
        if not rows:
            raise ResultsError(f"{path}: no arm {arm!r}; its arms: {'; '.join(arms)}")
    elif len(arms) > 1:
        raise ResultsError(
            f"{path} holds {len(arms)} arms ({'; '.join(arms)}); name one with --arm (one per run, "
            "in order: compare the file with itself to compare two of its arms)"
        )
    by_description = all((r.get("testCase") or {}).get("description") for r in rows)
    outcomes: list[Outcome] = []
    for row in sorted(rows, key=lambda r: int(r.get("testIdx") or 0)):
        task = _task_of(row, by_description)
        where = f"{path}: test {task}"
        if row.get("failureReason") == ERROR or (row.get("error") and not row.get("gradingResult")):
            outcomes.append(Outcome(task, None, None, str(row.get("error"))))
            continue
        outcomes.append(Outcome(task, None, checked_reward(_reward(row, scorer, where), where, LOG_RESCALE)))
    tasks = "test description" if by_description else "test vars (the tests have no descriptions)"
    notes = [
        f"arm {arm or arms[0]}",
        f"reward {scorer or 'score'}",
        f"tasks by {tasks}; a --repeat is a trial",
    ]
    if label is None and arm is not None:
        label = f"{path.name} [{arm}]"
    return made_run(path, "promptfoo", label, outcomes, notes)


def _jsonl_rows(path: Path) -> list[Any]:
    """``-o results.jsonl``'s rows: what ``results.results`` holds in the JSON, one a line."""
    rows = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            rows += [json.loads(text)] if text.strip() else []
        except json.JSONDecodeError as exc:
            said = f"{path}:{number}: not a JSON row ({exc}); one promptfoo result a line"
            raise ResultsError(said) from None
    return rows


def _task_of(row: dict[str, Any], by_description: bool) -> str:
    """A test's task id: its description, else its vars (``--repeat`` runs a test again under a
    new ``testIdx``, with the same description and vars: a trial of the same task)."""
    case = row.get("testCase") or {}
    if by_description:
        return str(case["description"])
    return json.dumps(case.get("vars", row.get("vars")), sort_keys=True, ensure_ascii=False)


def _arm_names(row: dict[str, Any]) -> list[str]:
    provider, prompt = row.get("provider") or {}, row.get("prompt") or {}
    names = [provider.get("id"), provider.get("label")] if isinstance(provider, dict) else [provider]
    if isinstance(prompt, dict):
        names.append(prompt.get("label"))
    return [str(n) for n in names if n]


def _reward(row: dict[str, Any], scorer: str | None, where: str) -> Any:
    if scorer is None:
        return row.get("score")
    if scorer == "success":
        return bool(row.get("success"))
    named = row.get("namedScores") or {}
    if scorer not in named:
        raise ResultsError(
            f"{where}: no named score {scorer!r} (its named scores: {', '.join(named) or 'none'}); "
            "--scorer takes a named score, or success"
        )
    return named[scorer]
