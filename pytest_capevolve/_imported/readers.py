"""Which reader reads a results file: the one registry of sources (:data:`READERS`).

A source is a name, a test of the file (its suffix, and for JSON the first document's shape)
and a reader. :func:`read_results` picks the first source whose test passes, or the one named
by ``--format``. A new source is a module with its reader and one line here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .inspect_log import looks_like_inspect_json, read_inspect
from .results import ImportedRun, ResultsError
from .table import read_csv, read_jsonl

Reader = Callable[[Path, str | None, str | None], ImportedRun]


@dataclass(frozen=True)
class Source:
    """A kind of results file: ``matches(path, head)`` says whether a file is one (``head``:
    its parsed JSON for a ``.json`` file, else None), ``read(path, label, scorer)`` reads it."""

    name: str
    matches: Callable[[Path, Any], bool]
    read: Reader
    what: str  # one line for the docs and the error that lists the formats


def _suffix(*suffixes: str) -> Callable[[Path, Any], bool]:
    return lambda path, head: path.suffix.lower() in suffixes


READERS: dict[str, Source] = {
    "inspect": Source(
        "inspect",
        lambda path, head: path.suffix.lower() == ".eval" or looks_like_inspect_json(head),
        lambda path, label, scorer: read_inspect(path, label, scorer),
        "an inspect_ai log (.eval or .json): samples × epochs, one scorer's value",
    ),
    "csv": Source(
        "csv",
        _suffix(".csv"),
        lambda path, label, scorer: read_csv(path, label),
        "a CSV of task_id, trial, reward",
    ),
    "jsonl": Source(
        "jsonl",
        _suffix(".jsonl", ".ndjson"),
        lambda path, label, scorer: read_jsonl(path, label),
        "JSON Lines of {task_id, trial, reward}",
    ),
}
FORMATS = tuple(READERS)


def read_results(
    path: Path, *, format: str | None = None, label: str | None = None, scorer: str | None = None
) -> ImportedRun:
    """The run in ``path``, by the reader ``format`` names or the first whose test passes."""
    if not path.is_file():
        raise ResultsError(f"no such results file: {path}")
    if format is not None:
        if format not in READERS:
            raise ResultsError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
        return READERS[format].read(path, label, scorer)
    head = _json_head(path) if path.suffix.lower() == ".json" else None
    for source in READERS.values():
        if source.matches(path, head):
            return source.read(path, label, scorer)
    raise ResultsError(
        f"{path}: not a results file this command knows; name its format with --format "
        f"({', '.join(FORMATS)}), or export it as a CSV of task_id, trial, reward"
    )


def _json_head(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: not JSON ({exc}); a results file in JSON must parse") from None
