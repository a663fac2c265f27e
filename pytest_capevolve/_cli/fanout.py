"""The per-task fan-out's helpers: ``eval-task`` (one candidate on a few named train or val tasks,
for diagnosis) and ``mechanism add|list`` (the shared mechanisms ledger). Each prints one JSON
object (``--table``: lines for people); a refusal is one line, exit 2."""

from __future__ import annotations

import argparse
from typing import Any

from .common import emit, open_run
from .decisions import loop_arguments


def cmd_eval_task(args: argparse.Namespace) -> int:
    """Run TAG on the named tasks for diagnosis: per-task outcomes, nothing booked, no evidence."""
    from .._loop.task_eval import parse_ids, render_table, task_eval

    spec, rundir = open_run(args)
    answer = task_eval(spec, rundir, args.tag, parse_ids(args.tasks), trials=args.trials)
    return emit(args, answer, render_table, json_default=True)


def cmd_mechanism_add(args: argparse.Namespace) -> int:
    """Append a general mechanism to the run's ledger (deduplicated, leak-guarded)."""
    from .._loop.mechanisms import add
    from .._loop.task_eval import parse_ids

    spec, rundir = open_run(args)
    tasks = parse_ids(args.tasks) if args.tasks else []
    answer = add(spec, rundir, args.text, tasks, by=args.by)
    return emit(args, answer, _added_lines, json_default=True)


def cmd_mechanism_list(args: argparse.Namespace) -> int:
    """The run's mechanisms ledger (``--task ID``: those about ID and those about no task)."""
    from .._loop.mechanisms import listing, render

    _, rundir = open_run(args)
    answer = listing(rundir, args.task)
    return emit(args, answer, lambda a: render(a["run_id"], a["mechanisms"]).splitlines(), json_default=True)


def _added_lines(answer: dict[str, Any]) -> list[str]:
    entry = answer["entry"]
    return [f"{answer['status']}: {entry['id']} {entry['text']} (tasks: {', '.join(entry['tasks']) or '—'})"]


def register(sub: Any) -> None:
    """The fan-out helpers on the ``capevolve`` parser."""
    run = sub.add_parser(
        "eval-task", help="a candidate on named train/val tasks, for diagnosis (no evidence, nothing booked)"
    )
    run.add_argument("tag", help="the candidate: a work copy, a snapshot, or seed")
    run.add_argument("tasks", metavar="IDS", help="train or val task ids, a,b,c (test is sealed)")
    loop_arguments(run)
    run.add_argument(
        "--trials", type=int, metavar="K", help="trials per task (default: the spec's num_trials)"
    )
    run.set_defaults(func=cmd_eval_task, refusals=True)

    ledger = sub.add_parser("mechanism", help="the shared mechanisms ledger of a fan-out").add_subparsers(
        dest="action", required=True
    )
    add = ledger.add_parser("add", help="append a general mechanism (deduplicated; no test id or gold)")
    add.add_argument("text", help="the cause, in a sentence")
    loop_arguments(add)
    add.add_argument("--tasks", default="", metavar="IDS", help="train or val tasks it was seen on, a,b")
    add.add_argument("--by", metavar="TAG", help="the work copy that found it")
    add.set_defaults(func=cmd_mechanism_add, refusals=True)
    show = ledger.add_parser("list", help="the ledger as JSON (--table: as MECHANISMS.md)")
    loop_arguments(show)
    show.add_argument("--task", metavar="ID", help="only entries about ID, and those about no task")
    show.set_defaults(func=cmd_mechanism_list, refusals=True)
