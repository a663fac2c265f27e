"""``capevolve compare A B [C …]``: results people already have, decided by the gate's test.

Reads finished runs (:data:`.._imported.readers.READERS`) and decides each against the first;
exits as a gate does (0, 10, 11; 4 for a file that cannot be read). Writes nothing but
``--markdown FILE``."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from .. import exitcodes
from .common import UsageError, add_dropped, emit, said_as
from .decisions import spec_value


def cmd_compare(args: argparse.Namespace) -> int:
    from .._imported.compare import CompareSettings, compare_files
    from .._imported.readers import ReadOptions
    from .._imported.results import ResultsError
    from .._show.compare import render_markdown, render_table

    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(CompareSettings)}
    given.update(margin=args.margin or 0.0, equivalence=args.equivalence or 0.0)  # neither: ask 'better'
    settings = CompareSettings(**given)
    labels, arms = _per_run(args, "label"), _per_run(args, "arm")
    options = [ReadOptions(label, args.scorer, arm) for label, arm in zip(labels, arms, strict=True)]
    with said_as(UsageError, ResultsError):
        result = compare_files(
            args.runs, settings, format=args.format, options=options, clusters=args.clusters
        )
    if args.markdown is not None:
        args.markdown.write_text(render_markdown(result), encoding="utf-8")
    emit(args, result.to_dict(), lambda _: render_table(result))
    return exitcodes.for_decisions(result.decisions)


def _per_run(args: argparse.Namespace, name: str) -> list[str | None]:
    """A repeated option given once per run, in order (fewer: the rest have none)."""
    given = list(getattr(args, name) or [])
    if len(given) > len(args.runs):
        raise UsageError(
            f"{len(given)} --{name} given for {len(args.runs)} runs; one per run at most, in order"
        )
    return [*given, *[None] * (len(args.runs) - len(given))]


def register(sub: Any) -> None:
    """``compare`` on the ``capevolve`` parser."""
    from .._decide.verdict import REGRESSION_RULES
    from .._imported.compare import MULTIPLE
    from .._imported.readers import FORMATS

    compare = sub.add_parser(
        "compare",
        help="decide finished runs (inspect_ai logs, lm-eval samples, promptfoo or deepeval JSON, a CSV/JSONL"
        " of task_id, trial, reward) against a baseline with the gate's exact paired test (pays nothing)",
    )
    add = compare.add_argument
    add("runs", nargs="+", type=Path, metavar="RUN", help="results files: the baseline first")
    add_dropped(
        compare,
        "--pairwise",
        "to gate on a judge's preferences, set gate_mode: pairwise in capevolve.yaml and gate in a session",
    )
    add("--format", choices=FORMATS, help="read every file as this (default: by its suffix and content)")
    add("--label", action="append", metavar="NAME", help="a run's name, per run")
    add("--arm", action="append", metavar="NAME", help="promptfoo: a file's provider or prompt, per run")
    add(
        "--scorer",
        help="what is the reward: an inspect_ai scorer, an lm-eval METRIC[,FILTER], a promptfoo named "
        "score, a deepeval metric, a CSV / JSONL column, or success (promptfoo, deepeval); default: the "
        "file's first (a table's reward or score)",
    )
    add(
        "--clusters",
        type=Path,
        metavar="FILE",
        help="a CSV/JSONL of task_id, cluster (tasks sharing a source): the test flips whole clusters",
    )
    question = compare.add_mutually_exclusive_group()
    question.add_argument(
        "--margin", type=float, metavar="DELTA", help="non-inferiority: 'no worse than DELTA' (in (-1, 0])"
    )
    question.add_argument(
        "--equivalence", type=float, metavar="M", help="'within ±M of the baseline' (TOST; M in (0, 1))"
    )
    add("--alpha", type=spec_value("gate_alpha"), default=0.05, help="the test's α (default 0.05)")
    add(
        "--min-coverage",
        type=spec_value("min_coverage"),
        default=0.8,
        help="paired coverage below it: indecisive",
    )
    add("--multiple", choices=MULTIPLE, default="holm", help="α across several runs (default holm)")
    add(
        "--success-threshold",
        type=spec_value("success_threshold"),
        default=1.0,
        help="a trial passes at this reward (bands, regressions)",
    )
    add("--regression-rule", choices=REGRESSION_RULES, default="noise", help="which drops are regressions")
    add("--veto-regressions", action="store_true", help="a regression turns an accept into a reject")
    add("--markdown", type=Path, metavar="FILE", help="write a Markdown summary a CI job can post")
    add("--json", action="store_true", help="print only JSON on stdout (the table to stderr)")
    compare.set_defaults(func=cmd_compare)
