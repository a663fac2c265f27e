"""``capevolve compare A B [C …]``: results people already have, decided by the gate's test.

Reads finished runs (:data:`.._imported.readers.READERS`) and decides each against the first,
or with ``--pairwise`` one table of a judge's preferences by the sign test; exits as a gate
does (0, 10, 11; 4 for a file that cannot be read). Writes nothing but ``--markdown FILE``."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import exitcodes
from .common import UsageError, emit, said_as
from .decisions import spec_value


def cmd_compare(args: argparse.Namespace) -> int:
    from .._imported.compare import CompareSettings, compare_files
    from .._imported.pairwise import looks_pairwise
    from .._imported.readers import ReadOptions
    from .._show.compare import render_markdown, render_table

    if args.pairwise or (len(args.runs) == 1 and looks_pairwise(args.runs[0])):
        return _cmd_pairwise(args)
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(CompareSettings)}
    given.update(margin=args.margin or 0.0, equivalence=args.equivalence or 0.0)  # neither: ask 'better'
    settings = CompareSettings(**given)
    labels, arms = _per_run(args, "label"), _per_run(args, "arm")
    options = [ReadOptions(label, args.scorer, arm) for label, arm in zip(labels, arms, strict=True)]
    return _answer(
        args,
        lambda: compare_files(
            args.runs, settings, format=args.format, options=options, clusters=args.clusters
        ),
        render_markdown,
        render_table,
    )


def _cmd_pairwise(args: argparse.Namespace) -> int:
    """``compare --pairwise PREFS``: one file of the judge's preferences, the sign test."""
    from .._imported.pairwise import compare_pairwise
    from .._imported.table import read_cluster_map
    from .._show.compare import render_pairwise_markdown, render_pairwise_table

    if len(args.runs) != 1:
        raise UsageError(
            f"--pairwise reads one file of preferences (task_id, preference A/B/tie); {len(args.runs)} "
            "given: put both runs' judgements in one file"
        )
    given = [f"--{name}" for name in ("format", "scorer", "arm") if getattr(args, name)]
    if given:
        raise UsageError(
            f"{', '.join(given)}: for files of rewards; --pairwise reads a table of preferences "
            "(task_id, preference A/B/tie), by its suffix: drop them"
        )
    questions = [f"--{name}" for name in ("margin", "equivalence") if getattr(args, name) is not None]
    if questions:
        raise UsageError(
            f"{questions[0]}: the pairwise sign test asks only whether B is preferred; drop it, or "
            "compare two files of rewards (one per run) to ask 'no worse than' or 'within ±'"
        )
    labels = [*(args.label or []), None, None]
    if len(labels) > 4:
        raise UsageError("--pairwise takes two --label at most: A's name, then B's")
    return _answer(
        args,
        lambda: compare_pairwise(
            args.runs[0],
            alpha=args.alpha,
            min_coverage=args.min_coverage,
            labels=(labels[0], labels[1]),
            clusters=None if args.clusters is None else read_cluster_map(args.clusters),
        ),
        render_pairwise_markdown,
        render_pairwise_table,
    )


def _answer(
    args: argparse.Namespace,
    decided: Callable[[], Any],
    markdown: Callable[[Any], str],
    table: Callable[[Any], list[str]],
) -> int:
    """The decisions, the Markdown summary when asked, the table or JSON, and the exit code."""
    from .._imported.results import ResultsError

    with said_as(UsageError, ResultsError):
        result = decided()
    if args.markdown is not None:
        args.markdown.write_text(markdown(result), encoding="utf-8")
    emit(args, result.to_dict(), lambda _: table(result))
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
    add(
        "--pairwise",
        action="store_true",
        help="RUN is one table of a judge's preferences (task_id, preference A/B/tie, optional "
        "trial, order, cluster): the exact sign test of B preferred to A (a file with a "
        "preference or winner column alone is read so without it)",
    )
    add("--format", choices=FORMATS, help="read every file as this (default: by its suffix and content)")
    add("--label", action="append", metavar="NAME", help="a run's name, per run (--pairwise: A's, then B's)")
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
