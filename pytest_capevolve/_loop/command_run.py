"""Opening a project's run for a ``capevolve`` loop command that a loop module registers itself
(:func:`.multirep.add_command`, :func:`.merge.add_command`), and printing its answer.

The command convention: optional positional PROJECT (default ``.``), ``--run-id``, ``--json``
(one JSON object, alone on stdout); a refusal is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._policy import Refusal
from .._project.candidate import CandidateError
from .._project.spec import Spec, SpecError, load_spec
from .._store.rundir import RunDir, RunDirError

REFUSED = 2


def common_arguments(parser: argparse.ArgumentParser, *, positional_project: bool = True) -> None:
    """PROJECT as an optional positional, or as ``--project`` for a command whose positionals
    are a list of tags (``merge A B C``, where a trailing folder would be ambiguous)."""
    if positional_project:
        parser.add_argument(
            "project", type=Path, nargs="?", default=Path("."), help="project folder (default .)"
        )
    else:
        parser.add_argument("--project", type=Path, default=Path("."), help="project folder (default .)")
    parser.add_argument("--run-id", default=None, help="use this run instead of the newest")
    parser.add_argument("--json", action="store_true", help="print one JSON object (only that) on stdout")


def open_run(project: Path, run_id: str | None) -> tuple[Spec, RunDir]:
    """The spec and the run (the newest unless ``run_id``); refused when there is none yet."""
    try:
        spec = load_spec(project)
        rundir = RunDir.resolve(spec.project_dir, run_id, create=False)
    except (SpecError, RunDirError) as exc:
        raise Refusal(str(exc)) from None
    if rundir.splits() is None:
        raise Refusal(
            f"run {rundir.run_id} has no frozen splits yet; evaluate first: pytest --capevolve-run "
            f"{spec.project_dir}"
        )
    return spec, rundir


def command(
    name: str,
    answer: Callable[[argparse.Namespace], dict[str, Any]],
    lines: Callable[[dict[str, Any]], list[str]],
) -> Callable[[argparse.Namespace], int]:
    """The ``func`` of a loop command: ``answer`` computes the JSON object; printed as JSON with
    ``--json``, else as ``lines``. A refusal prints one line on stderr and returns exit 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            report = answer(args)
        except (Refusal, CandidateError, RunDirError) as exc:
            print(f"error: capevolve {name} refused: {exc}", file=sys.stderr)
            return REFUSED
        if args.json:
            print(json.dumps(report, sort_keys=True, ensure_ascii=False, default=str))
        else:
            for line in lines(report):
                print(line)
        return int(report.get("exit_code", 0))

    return run
