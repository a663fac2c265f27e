"""The optimize loop's primitives on a run: ``work new``, ``spend``, ``diagnose``, ``diff``,
``multirep`` and ``merge``, each one :mod:`.._loop` or :mod:`.._policy` answer printed through
:func:`.common.emit`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import exitcodes
from .._project.spec import SPEC_FILENAME, Spec
from .._store.rundir import RunDir
from .common import Refusal, add_project_args, emit, open_run
from .decisions import key_lines, loop_arguments


def cmd_work_new(args: argparse.Namespace) -> int:
    """Copy the best's (or --from's) snapshot into runs/<id>/work/<TAG>/ for an optimizer to edit."""
    from .._loop.work import new_work_copy

    spec, rundir = open_run(args)
    return emit(args, new_work_copy(spec, rundir, args.tag, args.parent), key_lines, json_default=True)


def cmd_spend(args: argparse.Namespace) -> int:
    """Spend against every ceiling, whether N siblings fit, and stop / narrow / continue."""
    from .._policy.budget.spend import render_table, spend_report

    if args.n_siblings < 1:
        raise Refusal(f"--n-siblings {args.n_siblings}: give at least 1")
    spec, rundir = open_run(args)
    report = spend_report(spec, rundir, n_siblings=args.n_siblings, nulls=args.nulls)
    return emit(args, report, render_table, json_default=True)


def cmd_diagnose(args: argparse.Namespace) -> int:
    """A tag's per-task bands and failure clusters from persisted rollouts; pays nothing."""
    from .._loop.diagnose import diagnose, export_reflective, render_table

    spec, rundir = open_run(args)
    report = diagnose(
        spec, rundir, args.tag, split=args.split, compare_split=args.compare_split, cluster=args.cluster
    )
    if args.export is not None:
        report["export"] = export_reflective(spec, rundir, args.tag, args.export, split=args.split)
    return emit(args, report, render_table, json_default=True)


def cmd_diff(args: argparse.Namespace) -> int:
    """What a candidate changed: a unified diff of two snapshots (default: against its parent)."""
    from .._loop.git_store import unified_diff

    _diff_operands(args)
    spec, rundir = open_run(args)
    if args.other is not None and (args.best or args.parent):
        raise Refusal("give B, --best or --parent, not several")
    if args.other is not None:
        other = args.other
    elif args.best:
        other = rundir.state.best()
    else:
        decided = next((d for d in rundir.decisions() if d["tag"] == args.tag), None)
        verdict = rundir.verdicts.verdict(args.tag)
        other = (decided or {}).get("parent") or (verdict or {}).get("against")
        if other is None:
            raise Refusal(f"{args.tag!r} has no recorded parent (no decision, no verdict); name B")
    diff = unified_diff(_folder(spec, rundir, other), _folder(spec, rundir, args.tag), other, args.tag)
    if args.json:
        emit(args, {"tag": args.tag, "other": other, "diff": diff}, None)
    else:
        sys.stdout.write(diff)
    return exitcodes.OK


def _folder(spec: Spec, rundir: RunDir, tag: str) -> Path:
    """``tag``'s files: its snapshot, else its capability or source folder, else its work copy."""
    snapshot = rundir.snapshots.snapshot_dir(tag)
    if snapshot.is_dir():
        return snapshot
    if tag == "seed":
        return spec.capability_path
    source = ((rundir.verdicts.verdict(tag) or {}).get("details") or {}).get("source")
    if source and Path(source).is_dir():
        return Path(source)
    if rundir.work_dir(tag).is_dir():
        return rundir.work_dir(tag)
    raise Refusal(f"no snapshot or work copy of {tag!r} in run {rundir.run_id}")


def _diff_operands(args: argparse.Namespace) -> None:
    """``diff A [B] [PROJECT]``: of the operands after A, a folder holding a spec is the project
    and anything else is B (a tag never holds a capevolve.yaml)."""
    args.other, args.project = None, None
    for operand in args.operands:
        if (Path(operand) / SPEC_FILENAME).is_file() and args.project is None:
            args.project = Path(operand)
        elif args.other is None:
            args.other = operand
        else:
            raise Refusal(f"diff takes A, then B and/or PROJECT; {operand!r} is one too many")


def cmd_multirep(args: argparse.Namespace) -> int:
    """A comparison's error across replicate blocks (whole runs); pays nothing."""
    from .._loop.multirep import multirep, render

    spec, rundir = open_run(args)
    answer = multirep(spec, rundir, args.tag, args.against)
    emit(args, answer, None if args.json else render)
    return int(answer.get("exit_code", exitcodes.OK))  # type: ignore[call-overload]  # an int when present


def cmd_merge(args: argparse.Namespace) -> int:
    """One work copy from siblings' changes onto their common parent (``--integrate``: gated)."""
    from .._loop.merge import integrate, merge, render

    spec, rundir = open_run(args)
    if args.integrate:
        answer = integrate(spec, rundir, args.candidates, args.tag, onto=args.onto, workers=args.workers)
    elif args.workers:
        raise Refusal("-n goes with --integrate (its gate sessions); a plain merge pays nothing")
    else:
        answer = merge(spec, rundir, args.candidates, args.tag, onto=args.onto)
    emit(args, answer, None if args.json else render)
    return int(answer.get("exit_code", exitcodes.OK))


def register(sub: Any) -> None:
    """The loop primitives on the ``capevolve`` parser."""
    work = sub.add_parser("work", help="work copies for an optimizer").add_subparsers(
        dest="action", required=True
    )
    new = work.add_parser("new", help="copy the best's snapshot into runs/<id>/work/TAG/")
    new.add_argument("tag")
    loop_arguments(new)
    new.add_argument("--from", dest="parent", metavar="TAG", help="copy this tag instead")
    new.set_defaults(func=cmd_work_new, refusals=True)
    spend = sub.add_parser("spend", help="spend vs ceilings, whether N siblings fit, stop/narrow/continue")
    loop_arguments(spend)
    spend.add_argument("--n-siblings", type=int, default=1, metavar="N", help="siblings to price (default 1)")
    spend.add_argument(
        "--nulls", type=int, default=2, metavar="N", help="null controls a round adds (default 2)"
    )
    spend.set_defaults(func=cmd_spend, refusals=True)
    diag = sub.add_parser("diagnose", help="a tag's per-task bands and failure clusters (pays nothing)")
    diag.add_argument("tag")
    loop_arguments(diag)
    diag.add_argument("--split", default="val", help="val (default) or train; test is sealed")
    diag.add_argument("--compare-split", metavar="SPLIT", help="compare clusters with train/val")
    diag.add_argument(
        "--cluster",
        choices=("normalized", "loose", "exact"),
        default="normalized",
        help="group failures: numbers and ids folded, quoted words kept (normalized), quoted text "
        "folded too (loose), identical feedback only (exact); paraphrases merged but under exact",
    )
    diag.add_argument("--export", type=Path, metavar="FILE.jsonl", help="write the reflective dataset")
    diag.set_defaults(func=cmd_diagnose, refusals=True)
    diff = sub.add_parser("diff", help="what a candidate changed: a unified diff of snapshots")
    diff.add_argument("tag")
    diff.add_argument(
        "operands", nargs="*", metavar="B|PROJECT", help="compare with tag B; the project folder (default .)"
    )
    add_project_args(diff, positional=False)
    diff.add_argument("--best", action="store_true", help="compare with the current best")
    diff.add_argument("--parent", action="store_true", help="compare with its parent (the default)")
    diff.set_defaults(func=cmd_diff, refusals=True)
    multi = sub.add_parser(
        "multirep", help="a comparison's error across replicate blocks (whole runs); pays nothing"
    )
    multi.add_argument("tag")
    add_project_args(multi)
    multi.add_argument("--against", metavar="OTHER", help="compare with this tag (default: best)")
    multi.set_defaults(func=cmd_multirep, refusals=True)
    merge = sub.add_parser("merge", help="one work copy from siblings' changes onto their common parent")
    merge.add_argument("candidates", nargs="+", metavar="TAG", help="the candidates to merge, in order")
    merge.add_argument("--tag", required=True, help="the merged candidate's tag")
    add_project_args(merge, positional=False)
    merge.add_argument("--onto", metavar="TAG", help="merge onto this tag (default: common parent)")
    merge.add_argument(
        "--integrate", action="store_true", help="gate after each addition; keep what clears it"
    )
    merge.add_argument(
        "-n", "--workers", type=int, default=0, help="xdist workers for --integrate's sessions"
    )
    merge.set_defaults(func=cmd_merge, refusals=True)
