"""The optimize loop's commands on a run: ``work new``, ``spend``, ``diagnose``, ``diff``,
``multirep``, ``merge``, the per-task fan-out's ``eval-task`` (a candidate on a few named train or
val tasks, for diagnosis) and ``mechanism add|list`` (the shared ledger), and ``hill-climb`` (the
loop that runs by itself, :class:`.._loop.hill_climb.HillClimb`; exit 3 when an evaluation did
not complete, ``--resume`` continues it). Each prints one :mod:`.._loop` or :mod:`.._policy`
answer through :func:`.common.emit`, JSON by default (``--table``: for people)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from .. import exitcodes
from .._project.spec import SPEC_FILENAME
from .common import Refusal, add_dropped, add_project_args, emit, open_run, project_of, said_as, spec_of
from .decisions import key_lines, loop_arguments


def cmd_work_new(args: argparse.Namespace) -> int:
    """Copy the best's (or --from's) snapshot into runs/<id>/work/<TAG>/ for an optimizer to edit."""
    from .._loop.handover import new_work_copy

    spec, rundir = open_run(args)
    return emit(args, new_work_copy(spec, rundir, args.tag, args.parent), key_lines, json_default=True)


def cmd_spend(args: argparse.Namespace) -> int:
    """Spend against every ceiling, whether N siblings fit, and stop / narrow / continue."""
    from .._policy.alpha.gate_settings import handoff_schedule_note
    from .._policy.budget.spend import render_table, spend_report

    if args.n_siblings < 1:
        raise Refusal(f"--n-siblings {args.n_siblings}: give at least 1")
    spec, rundir = open_run(args)
    # a loop's command, read as the hand-off reads the run: the loop's schedule before a first decision
    report = spend_report(spec, rundir, n_siblings=args.n_siblings, nulls=args.nulls, loop=True)
    if note := handoff_schedule_note(spec, rundir):
        report["schedule"] = note  # a one-shot gate as the first decision would freeze constant
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
    return emit(args, report, lambda shown: render_table(shown, spec.project_dir), json_default=True)


def cmd_diff(args: argparse.Namespace) -> int:
    """What a candidate changed: a unified diff of two snapshots (default: against its parent)."""
    from .._loop.task_eval import candidate_folder
    from .._project.candidate import unified_diff

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
    diff = unified_diff(
        candidate_folder(spec, rundir, other), candidate_folder(spec, rundir, args.tag), other, args.tag
    )
    if args.json:
        emit(args, {"tag": args.tag, "other": other, "diff": diff}, None)
    else:
        sys.stdout.write(diff)
    return exitcodes.OK


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
    entry = answer["entry"]
    line = f"{answer['status']}: {entry['id']} {entry['text']} (tasks: {', '.join(entry['tasks']) or '—'})"
    return emit(args, answer, lambda _: [line], json_default=True)


def cmd_mechanism_list(args: argparse.Namespace) -> int:
    """The run's mechanisms ledger (``--task ID``: those about ID and those about no task)."""
    from .._loop.mechanisms import listing, render

    _, rundir = open_run(args)
    answer = listing(rundir, args.task)
    return emit(args, answer, lambda a: render(a["run_id"], a["mechanisms"]).splitlines(), json_default=True)


def cmd_hill_climb(args: argparse.Namespace) -> int:
    """Run the loop on the project; print its summary (JSON, or ``--table``)."""
    from .._loop.hill_climb import HillClimb, Options, only_loop
    from .._loop.hill_climb_record import LoopIncomplete
    from .._project.spec import SpecError
    from .._project.way_on import LOOP_WORDS

    said = LOOP_WORDS.set(getattr(args, "words", None))  # its ways into a new run: the words typed
    try:
        project = project_of(args)
        spec_of(args)  # outside a project, say so before the loop starts
        named = [f.name for f in dataclasses.fields(Options) if f.name not in ("project", "log")]
        flags = {name: getattr(args, name) for name in named}
        flags.update(
            protected_paths=tuple(args.protected_paths or ()),
            capabilities=tuple(c for c in (args.capabilities or "").split(",") if c.strip()),
            writable=tuple(args.writable or ()),
        )
        with said_as(Refusal, SpecError):
            loop = HillClimb(Options(project=project, **flags))
        with only_loop(loop.spec.project_dir):
            summary = loop.run()
        return emit(args, summary, summary_lines, json_default=True)
    except LoopIncomplete as exc:  # only the loop's run raises it
        print(f"capevolve hill-climb: incomplete: {_resumed(str(exc), args.words)}", file=sys.stderr)
        return exitcodes.LOOP_INCOMPLETE
    finally:
        LOOP_WORDS.reset(said)


def _resumed(said: str, words: list[str] | None) -> str:
    """An incomplete loop's line with its way on as typed: the command again with ``--resume`` (its
    ``--optimizer …`` kept: a bare ``capevolve hill-climb --resume`` is refused where the spec names no
    optimizer; ``--new-run`` left out: a resume refuses it, and the new run is the current one by then)."""
    if words is None:
        return said
    import shlex

    kept = [w for w in words if not (len(name := w.split("=")[0]) > 2 and "--new-run".startswith(name))]
    if not any(len(w) > 4 and "--resume".startswith(w) for w in kept):
        kept.append("--resume")
    resume = shlex.join(["capevolve", *kept])
    if "capevolve hill-climb --resume" in said:
        return said.replace("capevolve hill-climb --resume", resume)
    return f"{said}; once its cause is fixed, {resume} continues it (what was paid is kept)"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The ``--table`` form of a loop's summary: one line per iteration, the best, why it stopped."""
    lines = [f"capevolve hill-climb — run {summary['run_id']}"]
    for row in summary["iterations"]:
        numbers = ""
        if row["delta_mean"] is not None:
            numbers += f"  Δ̄ {round(row['delta_mean'], 4) + 0.0:+.4f}"  # never "-0.0000"
        if row["p_value"] is not None:
            numbers += f"  p {row['p_value']:.4g}"
        # an adopted accept has no numbers of its own: say why (its label), not a blank
        basis = row["basis"] or ("adopted" if str(row.get("label") or "").startswith("adopted") else "")
        lines.append(f"{row['tag']}  {row['decision']:<11}{basis:<16}{numbers}")
    lines.append(f"best {summary['best']!r}; accepted: {', '.join(summary['accepted']) or 'none'}")
    lines.append(f"stopped: {summary['stopped']}")
    return lines


def register(sub: Any) -> None:
    """The loop's commands on the ``capevolve`` parser."""
    from .._decide.gate import GATE_MODES
    from .._project.spec import FOCUS_ALIASES, HILL_CLIMB_FOCUS, HILL_CLIMB_STORES

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
    spend.add_argument("--n-siblings", type=int, default=1, metavar="N", help="siblings to price")
    spend.add_argument("--nulls", type=int, default=2, metavar="N", help="null controls a round adds")
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
    diff.add_argument("operands", nargs="*", metavar="B|PROJECT", help="compare with B; project (default .)")
    add_project_args(diff, positional=False)
    diff.add_argument("--best", action="store_true", help="compare with the current best")
    diff.add_argument("--parent", action="store_true", help="compare with its parent (the default)")
    diff.set_defaults(func=cmd_diff, refusals=True)
    multi = sub.add_parser("multirep", help="a comparison's error across replicate blocks (whole runs)")
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
        "--integrate", action="store_true", help="gate each addition; keep what clears the gate"
    )
    merge.add_argument("-n", "--workers", type=int, default=0, help="xdist workers for --integrate")
    merge.set_defaults(func=cmd_merge, refusals=True)
    run = sub.add_parser(
        "eval-task", help="a candidate on named train/val tasks, for diagnosis (not evidence)"
    )
    run.add_argument("tag", help="the candidate: a work copy, a snapshot, or seed")
    run.add_argument("tasks", metavar="IDS", help="train or val task ids, a,b,c (test is sealed)")
    loop_arguments(run)
    run.add_argument("--trials", type=int, metavar="K", help="trials per task (default: num_trials)")
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
    hc = sub.add_parser("hill-climb", help="the optimize loop: optimizer → guards → val gate → commit")
    loop_arguments(hc)
    hc.add_argument("--optimizer", metavar="CMD", help="'CMD … {workdir} … {prompt}'")
    focus = (*HILL_CLIMB_FOCUS, *FOCUS_ALIASES)  # cap-evolve's `all-at-once` is `all`
    hc.add_argument("--focus", choices=focus, help="which failing val tasks to aim at")
    hc.add_argument(
        "--signal",
        choices=("val", "train"),
        default="val",
        help="whose failures the optimizer sees: val (the gate's split) or train (paid once per new best)",
    )
    hc.add_argument("--max-iterations", type=int, metavar="N", help="iterations in the run")
    hc.add_argument("--n-trials", type=int, metavar="K", help="trials (if the spec sets none)")
    hc.add_argument("--resume", action="store_true", help="finish an iteration a kill cut off")
    hc.add_argument("--new-run", action="store_true", help="start a new run (baseline first)")
    hc.add_argument("--gate-mode", choices=GATE_MODES)
    hc.add_argument("--k-se", type=float)
    hc.add_argument("--alpha", type=float)
    hc.add_argument(
        "--no-regression",
        nargs="?",
        const="noise",
        choices=("noise", "strict"),
        help="veto an accept that breaks a task: noise (the default when given), a drop beyond its "
        "own noise on a task the parent passed; strict, any val task the parent scored higher on",
    )
    hc.add_argument("--protected-paths", nargs="+", metavar="GLOB", help="also protect these")
    hc.add_argument("--capabilities", metavar="A,B", help="the allowed edit surface")
    hc.add_argument("--convergence", action="store_true", help="stop on a long plateau (stall ≥ 5)")
    hc.add_argument("-n", "--workers", type=int, default=0, help="xdist workers for each gate session")
    hc.add_argument("--store", choices=HILL_CLIMB_STORES, help="where every candidate is committed")
    add_dropped(
        hc, "--store-commit-cmd", "commit candidates to git (--store git) or keep snapshots (--store copy)"
    )
    hc.add_argument("--instructions-file", type=Path, metavar="F", help="the prompt template")
    hc.add_argument("--optimizer-timeout", type=float, default=1800.0, metavar="S", help="seconds (1800)")
    hc.add_argument(
        "--writable",
        action="append",
        type=Path,
        metavar="PATH",
        help="a folder or file outside the project the optimizer may also write (its own state); repeatable",
    )
    hc.set_defaults(func=cmd_hill_climb, refusals=True)
