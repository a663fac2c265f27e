"""Commands that read a run and decide nothing: ``runs``, ``verify``, ``plan``, ``measure`` and
``dashboard``. They pay no rollout — except ``measure --finalize``, which runs finalize once when the
test split is still sealed (without it, ``measure`` leaves the split sealed and says so).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from .. import exitcodes
from .._project.spec import SPEC_FILENAME
from .._store.files import collection_paused, unwritable_folder
from .._store.rundir import RunDir, RunDirError
from .common import (
    UsageError,
    add_project_args,
    emit,
    existing_project,
    human,
    open_run,
    project_given,
    project_of,
    said_as,
    spec_of,
    val_ids,
)


def cmd_runs(args: argparse.Namespace) -> int:
    """The project's runs, oldest first: best, iterations, spend, whether test is sealed."""
    from .._show.runs import list_runs, render_runs

    spec = spec_of(args)
    rows = list_runs(spec.project_dir)
    if not rows:
        from .._project.way_on import evaluate_first

        print(
            f"no run under {spec.project_dir / '.capevolve' / 'runs'} yet; "
            f"{evaluate_first(spec.project_dir)}",
            file=human(args),
        )
    return emit(args, rows, render_runs if rows else None)


def cmd_plan(args: argparse.Namespace) -> int:
    """Planning from what is persisted (best's val rollouts, null controls); pays nothing."""
    from .._policy.alpha.gate_settings import next_decision_spec
    from .._policy.alpha.resolution import next_level, resolution
    from .._policy.gate.regate import val_evidence
    from .._show.explain import plan_figures, render_plan

    spec, rundir = open_run(args)
    best = rundir.state.best()
    evidence = val_evidence(spec, rundir, val_ids(rundir))
    nulls = [t for t in rundir.snapshots.known_tags() if t.startswith(f"{best}-null")]
    # the MDE at the level the next decision will get (schedule, decisions so far, Holm share)
    decided = next_decision_spec(spec, rundir)
    events = rundir.log.events()
    level, _ = next_level(decided, events, max(args.n_siblings, 1))
    null_matrices = [evidence.matrix(t) for t in nulls]
    figures = plan_figures(
        evidence.matrix(best), null_matrices, num_trials=spec.num_trials, alpha=float(level)
    )
    if figures is None:
        raise UsageError(f"best {best!r} has fewer than two val tasks with rollouts")
    answer = {"best": best, **dataclasses.asdict(figures), "mde": figures.mde if figures.estimable else None}
    answer["mde_twice_the_tasks_or_trials"] = figures.mde / 2**0.5 if figures.estimable else None
    if not figures.estimable:
        answer["mde_note"] = figures.not_estimable
    found = resolution(decided, events, len(val_ids(rundir)), max(args.n_siblings, 1))
    answer["resolution"] = found
    if args.target is not None:
        answer["target"] = args.target
        answer["target_needs_task_equivalents"] = (args.target - figures.mean) * figures.n
    return emit(
        args, answer, lambda _: [*render_plan(best, figures, args.target), f"resolution: {found['sentence']}"]
    )


@collection_paused()
def cmd_measure(args: argparse.Namespace) -> int:
    """The run's one honest table; runs finalize first when the test split is still sealed."""
    from .._show.measure import measure, render_markdown, render_text
    from .._store.memory.seal import Seal

    spec, rundir = open_run(args)
    train = _train(args, spec, rundir)
    code = 0
    test_ids = (rundir.splits() or {}).get("test", [])
    sealed = bool(test_ids) and Seal(rundir).burned() is None
    if sealed and args.finalize:
        unwritable = unwritable_folder(rundir.root)
        if unwritable is not None:  # scoring the test split writes the run: say so, score nothing
            raise UsageError(
                f"{rundir.root} is read-only ({unwritable.strerror}) and its test split is unscored: "
                "--finalize scores it once, which writes the run; measure a writable copy, or leave "
                "out --finalize for the val figures alone"
            )
        code = _finalize(args, spec, rundir)
    elif sealed:  # a look at the table must never spend the one test score
        print(_sealed_line(args, spec, rundir), file=human(args))
    result = measure(spec, rundir, train_note=train)
    try:
        report: Path | None = rundir.write_report(render_markdown(result))
        where = f"report: {report}"
    except OSError as exc:  # a read-only run dir (a CI artifact): the measurement stands
        report, where = None, f"report.md not written: {rundir.root} is read-only ({exc.strerror or exc})"
    answer = {**dataclasses.asdict(result), "report": report, "finalize_exit": code}
    emit(args, answer, lambda _: [*render_text(result), where])
    return code


def _sealed_line(args: argparse.Namespace, spec: Any, rundir: RunDir) -> str:
    """What an unscored test split's table says: the finalize that scores it, or, where another run of the
    project scored its test tasks (that finalize is refused as held out), the one that scores it labelled."""
    from .._show.runs import scored_elsewhere
    from .._store.memory.project_seal import REUSED_LABEL

    words = _finalize_words(args, spec, rundir)
    if taken := scored_elsewhere(spec.project_dir, rundir):
        return (
            f"test split unscored, and its test tasks were scored by run {', '.join(taken)}: a finalize of "
            f"this run is refused as held out, so this table is val only; `{words} --capevolve-test-reused` "
            f"scores it labelled '{REUSED_LABEL}', or a new run with new test tasks gives a held-out one"
        )
    return (
        f"test split sealed: this table is val only; `{words}` scores the test split once (the run then "
        "chooses no new best)"
    )


def _finalize_words(args: argparse.Namespace, spec: Any, rundir: RunDir) -> str:
    """``capevolve measure --finalize`` for the project and run this table is of, as typed: pasted
    elsewhere, or once a newer run is the current one, it still scores this run's test split."""
    import shlex

    from .._project.way_on import shown

    words = ["capevolve", "measure", *([shown(spec.project_dir)] if project_given(args) else [])]
    words += ["--run-id", rundir.run_id] if getattr(args, "run_id", None) else []
    return shlex.join([*words, "--finalize"])


def _train(args: argparse.Namespace, spec: Any, rundir: RunDir) -> str:
    """``--train``: pay the train evaluation when the mode says so; the train row's note."""
    from .._loop.launch import evaluate_train, plan_train

    plan = plan_train(spec, rundir, args.train)
    if not plan.missing:
        return plan.note
    out = human(args)
    print(f"--train {args.train}: {plan.note} (the seed and the best on train)", file=out)
    out.flush()
    code = evaluate_train(spec, rundir, workers=args.workers, quiet_to=sys.stderr if args.json else None)
    if code not in (0, 1):  # 1: pytest's "some rollouts failed", a task the agent failed
        return f"not evaluated: the train session exited {code} (its log is above)"
    return plan_train(spec, rundir, "no").note


def _finalize(args: argparse.Namespace, spec: Any, rundir: RunDir) -> int:
    """Finalize the run as a child session; its output for people (stderr under ``--json``)."""
    from .._loop.launch import run_shown, session_command

    out = human(args)
    print(f"the test split of run {rundir.run_id} is unscored: running finalize (once per run)", file=out)
    out.flush()
    reused = ["--capevolve-test-reused"] if getattr(args, "test_reused", False) else []
    command = session_command(
        spec.path, mode="finalize", run_id=rundir.run_id, workers=args.workers, extra=reused
    )
    code = run_shown(command, spec.project_dir, sys.stderr if args.json else None)
    if code != 0:
        print(f"finalize did not complete (exit {code}); the test row stays sealed", file=sys.stderr)
    return code


@collection_paused()
def cmd_verify(args: argparse.Namespace) -> int:
    """Check the log's hash chain, then every rollout file and ``state.json`` against the events;
    exit 1 at any disagreement. ``--repair`` moves a damaged log tail aside, rebuilds
    ``state.json`` and quarantines a rollout file that differs from its event."""
    from .._store.log.event_chain import verify_events
    from .._store.readers.audit import audit

    rundir = _verified_run(args)
    root, events, out = rundir.root, rundir.events_path, human(args)
    answer: dict[str, Any] = {"run_dir": root, "repaired": [], "mismatches": []}
    if args.repair and (moved := rundir.log.repair_events()):
        answer["repaired"].append(f"{events}: moved {moved} damaged line(s) aside")
        print(f"repaired {answer['repaired'][-1]}", file=out)
    count, problem = verify_events(events)
    answer.update(events=count, tampered=problem)
    if problem is not None:
        print(f"TAMPERED {events}: {problem} ({count} line(s) before it verified)", file=out)
        return _verified(args, answer, ok=False)
    print(f"ok {events}: {count} events, each chained to the one before", file=out)
    if not _anchored(args, rundir, answer, out):
        return _verified(args, answer, ok=False)
    from .._policy.alpha.gate_settings import level_problems
    from .._store.log.event_chain import verified_events

    # the log as the chain's check just parsed it, for every check after it; None if it grew since
    logged = verified_events(rundir.events_path)
    if logged is None:
        logged = rundir.log.events()
    # the α levels come from the audit's pass, which hands over every event but the rollouts
    others: list[dict[str, Any]] = []
    problems = audit(rundir, repair=args.repair, events=logged, others=others)
    problems += level_problems(rundir, others)
    answer["mismatches"] = problems
    for line in problems:
        print(f"MISMATCH {line}", file=out)
    for notice in rundir.notices:
        print(f"repaired {notice}", file=out)
        answer["repaired"].append(notice)
    if problems:
        return _verified(args, answer, ok=False)
    print(f"ok {root}: rollout files and state.json agree with the events", file=out)
    return _verified(args, answer, ok=True)


def _anchored(args: argparse.Namespace, rundir: RunDir, answer: dict[str, Any], out: Any) -> bool:
    """Print the log's head, and look up the anchor (``--anchor HASH`` or
    ``--anchor-from-store [DIR]``): False, with one ANCHOR line, when the log no longer holds it."""
    from .._store.log.event_chain import AnchorError, find_anchor, head, parse_anchor

    top = head(rundir.log)
    answer["head"] = {"seq": top.seq, "hash": top.hash}
    print(f"head {top.seq} {top.hash} (keep it outside the project: verify --anchor {top.hash})", file=out)
    given = args.anchor
    if args.anchor_from_store is not None:
        if given is not None:
            raise UsageError("give --anchor HASH or --anchor-from-store, not both")
        from .._loop.git_store import StoreError, store_anchor

        store = args.anchor_from_store  # the newest anchor a hill-climb's git store (or a clone) committed
        with said_as(UsageError, StoreError):
            given = store_anchor(Path(store) if store else rundir.root / "store")
    if given is None:
        return True
    with said_as(UsageError, AnchorError):
        anchor = parse_anchor(given)
    seq = find_anchor(rundir.events_path, anchor)
    answer["anchor"] = {"hash": anchor, "seq": seq}
    if seq is None:
        print(
            f"ANCHOR {rundir.events_path}: no event hashes to {anchor}; the record was rewritten "
            "at or before the anchored event",
            file=out,
        )
        return False
    print(f"ok anchor: event {seq} of {top.seq} is the anchored one; the chain vouches for it", file=out)
    return True


def _verified(args: argparse.Namespace, answer: dict[str, Any], *, ok: bool) -> int:
    emit(args, {**answer, "ok": ok}, None)
    return exitcodes.OK if ok else exitcodes.CHECK_FAILED


def _verified_run(args: argparse.Namespace) -> RunDir:
    """``verify [PROJECT] [--run-id ID]``, or ``verify RUN_DIR`` (a folder holding ``events.jsonl``:
    a run dir on its own, such as a copy or a CI artifact, without its project). Reads no spec: a
    run whose project's spec is broken can still be checked."""
    target = project_of(args)
    if (target / "events.jsonl").is_file():
        if args.run_id is not None:
            raise UsageError(f"{target} is a run dir already; give it, or PROJECT --run-id ID, not both")
        with said_as(UsageError, RunDirError):
            return RunDir.opened(target.resolve())
    existing_project(args)  # the one message every command gives for a folder that is not there
    if not (target / SPEC_FILENAME).is_file():
        raise UsageError(
            f"no {SPEC_FILENAME} in {target.resolve()} (and it is not a run dir: no events.jsonl there); "
            "give the project: capevolve verify PROJECT [--run-id ID]"
        )
    with said_as(UsageError, RunDirError):
        return RunDir.resolve(target.resolve(), args.run_id, create=False)


@collection_paused()  # the page is drawn from every row of the run
def cmd_dashboard(args: argparse.Namespace) -> int:
    """Rebuild the run's ``dashboard.html`` (pays nothing, never opens the seal)."""
    from .._show.dashboard import write_dashboard
    from .._show.measure import measure
    from .._store.readers.evidence import index_records

    spec, rundir = open_run(args, splits=False)
    try:
        # every val tag's records, read once for both the table and the page
        has_val = (rundir.splits() or {}).get("val")
        val = index_records(rundir.rollouts.indexed_rollouts("val")) if has_val else None
        path = write_dashboard(
            rundir, spec.num_trials, measure(spec, rundir, {"val": val} if val else None), val
        )
    except (OSError, ValueError) as exc:  # a damaged file the run dir's reader does not repair
        raise UsageError(f"could not draw the run: {exc}") from None
    answer = {"dashboard": str(path), "run_id": rundir.run_id}
    emit(args, answer, None if args.json else lambda _: [f"dashboard: {path}"])
    if args.open:
        import webbrowser

        if not webbrowser.open(path.resolve().as_uri()):
            print(f"no web browser found: open {path} yourself", file=sys.stderr)
    return exitcodes.OK


def register(sub: Any) -> None:
    """``runs``, ``verify``, ``plan``, ``measure`` and ``dashboard`` on the ``capevolve`` parser."""
    plan = sub.add_parser("plan", help="minimum detectable effect and headroom (pays nothing)")
    add_project_args(plan)
    add = plan.add_argument
    add("--target", type=float, help="a target val mean to check")
    add(
        "--n-siblings", type=int, default=1, help="siblings gated together next (the resolution's Holm share)"
    )
    plan.set_defaults(func=cmd_plan)
    measure = sub.add_parser(
        "measure", help="the run's honest table and report.md (with --finalize: scores the test split once)"
    )
    add_project_args(measure)
    add = measure.add_argument
    add("--finalize", action="store_true", help="score the sealed test split first (once; then no new best)")
    add("--no-finalize", action="store_false", dest="finalize", help="leave the test split sealed (default)")
    add(
        "--test-reused",
        "--capevolve-test-reused",  # the seal's refusal names the pytest flag: measure runs that finalize
        action="store_true",
        help="finalize though another run of the project scored these test tasks (labelled so)",
    )
    add(
        "--train",
        choices=("no", "auto", "yes"),
        default="no",
        help="evaluate the seed and the best on train: auto when it adds information",
    )
    add("-n", "--workers", type=int, default=0, help="xdist workers for finalize")
    measure.set_defaults(func=cmd_measure)
    verify = sub.add_parser(
        "verify", help="check a run's events.jsonl hash chain, rollout files and state.json"
    )
    add_project_args(verify)  # the positional may also be a run dir on its own
    add = verify.add_argument
    add(
        "--repair",
        action="store_true",
        help="move a damaged events.jsonl tail aside; rebuild state.json from the events; "
        "quarantine rollout files that differ from their events",
    )
    add("--anchor", metavar="HASH", help="fail unless the log still holds event HASH (a head it printed)")
    add(
        "--anchor-from-store",
        nargs="?",
        const="",
        metavar="DIR",
        help="the anchor the hill-climb's git store committed last (DIR: a clone; default: the run's store/)",
    )
    verify.set_defaults(func=cmd_verify)
    runs = sub.add_parser("runs", help="the project's runs: best, iterations, spend, test sealed")
    add_project_args(runs, run_id=False)
    # the table is its default; --table is taken as the other commands take it, so a habit works
    runs.add_argument("--table", action="store_true", help="the table for people (the default here)")
    runs.set_defaults(func=cmd_runs)
    dashboard = sub.add_parser(
        "dashboard", help="rebuild the run's self-contained dashboard.html (pays nothing)"
    )
    add_project_args(dashboard)
    dashboard.add_argument("--open", action="store_true", help="open the page in a web browser")
    dashboard.set_defaults(func=cmd_dashboard)
