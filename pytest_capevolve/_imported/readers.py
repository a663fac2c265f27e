"""Which reader reads a results file: the one registry of sources (:data:`READERS`).

A source is a name, a test of the file (its suffix and head) and a reader;
:func:`read_results` picks the first whose test passes, or the one ``--format`` names."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .deepeval import looks_like_deepeval, read_deepeval
from .inspect_log import looks_like_inspect, read_inspect
from .lm_eval import looks_like_lm_eval, read_lm_eval
from .promptfoo import looks_like_promptfoo, read_promptfoo
from .results import ImportedRun, ReadOptions, ResultsError, json_document
from .table import read_csv, read_jsonl


@dataclass(frozen=True)
class Source:
    """A kind of results file: its test of the file (suffix and head) and its reader."""

    name: str
    matches: Callable[[Path, Any], bool]
    read: Callable[[Path, Any, ReadOptions], ImportedRun]


def _suffix(*suffixes: str) -> Callable[[Path, Any], bool]:
    return lambda path, head: path.suffix.lower() in suffixes


READERS: dict[str, Source] = {
    source.name: source
    for source in (
        Source("inspect", looks_like_inspect, read_inspect),  # an inspect_ai log (.eval or .json)
        Source("lm_eval", looks_like_lm_eval, read_lm_eval),  # samples_*.jsonl (--log_samples)
        Source("promptfoo", looks_like_promptfoo, read_promptfoo),  # promptfoo eval -o results.json
        Source("deepeval", looks_like_deepeval, read_deepeval),  # .deepeval/.latest_test_run.json
        Source("csv", _suffix(".csv"), read_csv),  # a table of task_id, trial, reward
        Source("jsonl", _suffix(".jsonl", ".ndjson"), read_jsonl),
    )
}
FORMATS = tuple(READERS)
# what a folder's results files may be called, to name them (a run's report.md or a dashboard is none)
RESULTS_SUFFIXES = frozenset({".eval", ".json", ".jsonl", ".ndjson", ".csv"})


def read_results(path: Path, *, format: str | None = None, options: ReadOptions | None = None) -> ImportedRun:
    """The run in ``path``, by the reader ``format`` names or the first whose test passes."""
    options = options or ReadOptions()
    if path.is_dir():
        if (path / "events.jsonl").is_file() and (path / "state.json").is_file():
            raise ResultsError(
                f"{path} is a capevolve run: its candidates are judged in it (`capevolve gate TAG`, "
                "`capevolve measure`), not by compare, which reads other tools' results files"
            )
        inside = sorted(str(f) for f in path.iterdir() if f.is_file() and f.suffix in RESULTS_SUFFIXES)
        named = ", ".join(inside[:3]) + (" …" if len(inside) > 3 else "") if inside else "(it holds none)"
        raise ResultsError(f"{path} is a folder (a --log-dir?); give one results file in it: {named}")
    if not path.is_file():
        raise ResultsError(f"no such results file: {path}")
    if format is not None:
        if format not in READERS:
            raise ResultsError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
        return _read(READERS[format], path, None, options)
    head = _head(path)
    for source in READERS.values():
        if source.matches(path, head):
            return _read(source, path, head, options)
    raise ResultsError(
        f"{path}: not a results file this command knows; name its format with --format "
        f"({', '.join(FORMATS)}), or export it as a CSV of task_id, trial, reward"
    )


def _read(source: Source, path: Path, head: Any, options: ReadOptions) -> ImportedRun:
    if options.arm is not None and source.name != "promptfoo":
        raise ResultsError(f"{path}: --arm names an arm of a promptfoo file; this is {source.name}")
    return source.read(path, head, options)


def _head(path: Path) -> Any:
    """A ``.json`` file's document, a ``.jsonl`` file's first object, else None."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        return json_document(path)
    if suffix == ".jsonl":
        with path.open(encoding="utf-8") as handle:
            first = next((line for line in handle if line.strip()), "")
        try:
            return json.loads(first) if first else None
        except json.JSONDecodeError:
            return None  # the reader says where, with the line number
    return None
