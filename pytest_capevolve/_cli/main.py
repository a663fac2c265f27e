"""The ``capevolve`` command: run-dir work that pays no rollouts (and ``check``, which pays one).

Every subcommand takes the project as an optional positional (default ``.``; ``--project DIR``
is the older spelling) and ``--run-id``; ``--json`` prints only JSON on stdout, everything
meant for people going to stderr. Exit codes are documented in the README.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from .._policy import Refusal as LoopRefusal
from .._project.candidate import CandidateError
from .._project.spec import (
    SPEC_FILENAME,
    Spec,
    SpecError,
    load_spec,
)
from .._store.rundir import RunDir, RunDirError

# Each command imports what it uses, and ``main`` registers only the command asked for when it
# is one of these (``build_parser`` registers every command for ``capevolve --help``): a command
# that reads a run must not pay for importing the adapter runner, the hill-climb or the importer.
CORE_COMMANDS = ("check", "gate", "plan", "measure", "verify", "runs", "microcase")


def cmd_check(args: argparse.Namespace) -> int:
    """Verify a project's spec and adapter before any rollout is paid for."""
    checks: list[dict[str, Any]] = []
    code = _check(args, checks)
    if args.json:
        _print_json({"ok": code == 0, "checks": checks})
    return code


def _check(args: argparse.Namespace, checks: list[dict[str, Any]]) -> int:
    from .._engine.runner import AdapterRunner, run_and_score
    from .._project.adapter import (
        AdapterError,
        check_reward,
        load_adapter,
        load_tasks,
    )

    problems: list[str] = []
    out = _human(args)

    def ok(message: str) -> None:
        checks.append({"ok": True, "message": message})
        print(f"ok    {message}", file=out)

    def fail(message: str) -> None:
        problems.append(message)
        checks.append({"ok": False, "message": message})
        print(f"FAIL  {message}", file=out)

    try:
        spec = _spec_of(args)
        if args.run_id is not None:
            RunDir.resolve(spec.project_dir, args.run_id, create=False)
        ok(f"spec {spec.path}")
        adapter = load_adapter(spec.adapter, spec.project_dir)
        ok(f"adapter {spec.adapter} has tasks, run_target and score")
        first = load_tasks(adapter, spec.adapter)
        second = load_tasks(adapter, spec.adapter)
    except (CliUsageError, RunDirError, AdapterError) as exc:
        fail(str(exc))
        return 1
    ok(f"{len(first)} tasks, ids unique")
    if list(first) != list(second) or any(first[k] != second[k] for k in first):
        fail("tasks('all') returned different tasks on a second call; make it deterministic")
    else:
        ok("tasks are the same across two calls")
    runner = AdapterRunner(adapter)
    task = first[sorted(first)[0]]
    scored = run_and_score(runner, task, spec.capability_path, seed=spec.base_seed, split="val")
    if scored.rollout is None or scored.reward is None:
        fail(f"task {task.id!r} with the seed capability gave an infra error: {scored.infra_error}")
        return 1
    try:
        again = runner.score(task, scored.rollout)
        reward = check_reward(again.reward, f"score({task.id!r})")
    except Exception as exc:
        fail(f"re-scoring task {task.id!r} raised {exc!r}")
        return 1
    if reward != scored.reward or str(again.feedback or "") != scored.feedback:
        fail(f"score is not deterministic: re-scoring one rollout gave {scored.reward} then {reward}")
    else:
        ok(f"score is deterministic on a re-score (reward {reward:g} on task {task.id!r})")
    return 1 if problems else 0


class CliUsageError(Exception):
    """Bad arguments or a run that cannot answer yet: printed as `error: …`, exit 4."""


# -- what every command shares: the project, the run, and where its output goes -------------------


def add_project_args(parser: argparse.ArgumentParser, *, run_id: bool = True) -> None:
    """PROJECT (optional positional, default .), ``--project`` (the older spelling), ``--run-id``
    and ``--json``: the same on every command."""
    parser.add_argument("project", type=Path, nargs="?", default=None, help="project folder (default .)")
    parser.add_argument(
        "--project",
        dest="project_option",
        type=Path,
        default=None,
        metavar="DIR",
        help="the same, as an option",
    )
    if run_id:
        parser.add_argument("--run-id", default=None, help="a run of the project (default: the newest)")
    parser.add_argument("--json", action="store_true", help="print only JSON on stdout (the rest to stderr)")


def _loop_project(args: argparse.Namespace) -> Path:
    """The project of a command: the positional or ``--project`` (not two different ones)."""
    positional, option = args.project, getattr(args, "project_option", None)
    if positional is not None and option is not None and positional.resolve() != option.resolve():
        raise CliUsageError(f"two projects given ({positional} and --project {option}); give one")
    return positional or option or Path(".")


def _spec_of(args: argparse.Namespace) -> Spec:
    """The project's spec; outside a project, says so in those words."""
    project = _loop_project(args)
    if not project.exists():
        raise CliUsageError(f"no such project folder: {project}; give a folder holding {SPEC_FILENAME}")
    if project.is_dir() and not (project / SPEC_FILENAME).is_file():
        raise CliUsageError(
            f"no {SPEC_FILENAME} in {project.resolve()}; run `capevolve {args.command}` in a project "
            "folder, or give the project folder as its PROJECT argument"
        )
    try:
        return load_spec(project)
    except SpecError as exc:
        raise CliUsageError(str(exc)) from None


def _human(args: argparse.Namespace) -> Any:
    """Where text for people goes: stdout, or stderr when stdout carries ``--json``."""
    return sys.stderr if getattr(args, "json", False) else sys.stdout


def _print_json(answer: Any) -> None:
    print(json.dumps(answer, sort_keys=True, ensure_ascii=False, default=str))


def _open_run(args: argparse.Namespace) -> tuple[Spec, RunDir, list[str]]:
    """The spec, the run and its frozen val ids, for commands that read a run and pay nothing."""
    spec = _spec_of(args)
    try:
        rundir = RunDir.resolve(spec.project_dir, args.run_id, create=False)
    except RunDirError as exc:
        raise CliUsageError(str(exc)) from None
    _OPENED.append(rundir)
    splits = rundir.splits()
    if splits is None:
        raise CliUsageError(
            f"run {rundir.run_id} has no rollouts yet; evaluate first: pytest --capevolve-run "
            f"{spec.project_dir}"
        )
    return spec, rundir, list(splits["val"])


_OPENED: list[RunDir] = []  # runs a command read: their notices (damage handled) are printed


def _val_evidence(
    spec: Spec, rundir: RunDir, val_ids: list[str], trials: int | None = None, tags: list[str] | None = None
) -> Any:
    """The val evidence, of ``tags`` only when given (from the index: no rollout file is read)."""
    from .._policy.verdicts import GATE_SPLIT, Evidence
    from .._store.evidence import index_records

    by_tag = index_records(rundir.rollouts.indexed_rollouts(GATE_SPLIT, tags))
    return Evidence(by_tag, val_ids, trials or spec.num_trials, rundir.snapshots.snapshot_size)


def cmd_gate(args: argparse.Namespace) -> int:
    """Re-derive a verdict from persisted val rollouts; pays no rollout."""
    from .._policy.verdicts import gate_config
    from .._session import exitcodes
    from .._show.report import render_verdicts

    spec, rundir, val_ids = _open_run(args)
    known = set(rundir.snapshots.known_tags())
    recorded = rundir.verdicts.verdict(args.tag)
    against = args.against or (recorded["against"] if recorded else rundir.state.best())
    for tag in (args.tag, against):
        if tag not in known:
            raise CliUsageError(
                f"unknown tag {tag!r} in run {rundir.run_id}; known: {', '.join(sorted(known))}"
            )
    if args.tag == against:
        raise CliUsageError(f"{args.tag!r} would be gated against itself; give --against another tag")
    nulls: list[float] = []
    # a grown verdict is re-derived as it was decided: at its pooled trials and its look's level
    looks = ((recorded or {}).get("details") or {}).get("looks") or {}
    grown = not args.against and int(looks.get("look", 1)) > 1
    if recorded and not args.against and not grown:
        null_verdicts = [rundir.verdicts.verdict(t) for t in recorded.get("nulls", [])]
        nulls = [v["delta_mean"] for v in null_verdicts if v is not None]
    tags = [args.tag, against, *((recorded or {}).get("nulls", []) if grown else [])]
    evidence = _val_evidence(spec, rundir, val_ids, recorded["trials"] if recorded and grown else None, tags)
    config = gate_config(
        spec,
        mode=args.gate_mode,
        k_se=args.k_se,
        alpha=args.alpha if args.alpha is not None or not grown else Fraction(looks["decision_alpha"]),
        veto_regressions=args.veto_regressions,
        look=int(looks["look"]) if grown else 1,
    )
    if grown and recorded:  # the grow judged its null controls at the pooled trials too
        judged = [evidence.judge(t, against, config).delta_mean for t in recorded.get("nulls", [])]
        nulls = [d for d in judged if d is not None]
    verdict = evidence.judge(args.tag, against, config, [n for n in nulls if n is not None] or None)
    for line in render_verdicts([verdict]):
        print(line, file=_human(args))
    if args.json:
        _print_json(verdict.to_dict())
    return {"accept": exitcodes.OK, "reject": exitcodes.REJECTED}.get(verdict.decision, exitcodes.INDECISIVE)


def cmd_plan(args: argparse.Namespace) -> int:
    """Planning from what is persisted (best's val rollouts, null controls); pays nothing."""
    from .._show.explain import plan_figures, render_plan

    spec, rundir, task_ids = _open_run(args)
    best = rundir.state.best()
    evidence = _val_evidence(spec, rundir, task_ids)
    nulls = [t for t in rundir.snapshots.known_tags() if t.startswith(f"{best}-null")]
    figures = plan_figures(
        evidence.matrix(best),
        [evidence.matrix(t) for t in nulls],
        num_trials=spec.num_trials,
        alpha=spec.gate_alpha,
    )
    if figures is None:
        raise CliUsageError(f"best {best!r} has fewer than two val tasks with rollouts")
    for line in render_plan(best, figures, args.target):
        print(line, file=_human(args))
    if args.json:
        answer = {"best": best, **dataclasses.asdict(figures), "mde": figures.mde}
        answer["mde_twice_the_tasks_or_trials"] = figures.mde / 2**0.5
        if args.target is not None:
            answer["target"] = args.target
            answer["target_needs_task_equivalents"] = (args.target - figures.mean) * figures.n
        _print_json(answer)
    return 0


def cmd_measure(args: argparse.Namespace) -> int:
    """The run's one honest table; runs finalize first when the test split is still sealed."""
    import subprocess

    from .._show.measure import measure, render_markdown, render_text
    from .._store.seal import Seal

    spec, rundir, _val = _open_run(args)
    out = _human(args)
    code = 0
    test_ids = (rundir.splits() or {}).get("test", [])
    if test_ids and Seal(rundir).burned() is None and not args.no_finalize:
        print(f"the test split of run {rundir.run_id} is unscored: running finalize (once per run)", file=out)
        out.flush()
        command = [sys.executable, "-m", "pytest", "--capevolve-finalize", str(spec.path)]
        command += ["--capevolve-run-id", rundir.run_id, "-q", "--tb=no", "-p", "no:cacheprovider"]
        if args.workers:
            command += ["-n", str(args.workers)]
        if args.json:  # its output is for people: to stderr, after it ends
            done = subprocess.run(command, cwd=spec.project_dir, check=False, capture_output=True, text=True)
            sys.stderr.write(done.stdout + done.stderr)
            code = done.returncode
        else:
            code = subprocess.run(command, cwd=spec.project_dir, check=False).returncode
        if code != 0:
            print(f"finalize did not complete (exit {code}); the test row stays sealed", file=sys.stderr)
    result = measure(spec, rundir)
    for line in render_text(result):
        print(line, file=out)
    report = rundir.write_report(render_markdown(result))
    print(f"report: {report}", file=out)
    if args.json:
        _print_json({**dataclasses.asdict(result), "report": report, "finalize_exit": code})
    return code


def cmd_verify(args: argparse.Namespace) -> int:
    """Check the hash chain of a run's event log, then every rollout file and ``state.json``
    against the events; exit 1 at any disagreement. ``--repair`` moves a damaged log tail
    aside and rebuilds ``state.json`` from the log (it never rewrites a rollout)."""
    from .._store.audit import audit
    from .._store.events import verify_events

    rundir = _verified_run(args)
    root, events, out = rundir.root, rundir.events_path, _human(args)
    answer: dict[str, Any] = {"run_dir": root, "repaired": [], "mismatches": []}
    if args.repair:
        moved = rundir.log.repair_events()
        if moved:
            print(f"repaired {events}: moved {moved} damaged line(s) aside", file=out)
            answer["repaired"].append(f"{events}: moved {moved} damaged line(s) aside")
    count, problem = verify_events(events)
    answer.update(events=count, tampered=problem)
    if problem is not None:
        print(f"TAMPERED {events}: {problem} ({count} line(s) before it verified)", file=out)
        return _verify_answer(args, answer, ok=False)
    print(f"ok {events}: {count} events, each chained to the one before", file=out)
    problems = audit(rundir, repair=args.repair)
    answer["mismatches"] = problems
    for line in problems:
        print(f"MISMATCH {line}", file=out)
    for notice in rundir.notices:
        print(f"repaired {notice}", file=out)
        answer["repaired"].append(notice)
    if problems:
        return _verify_answer(args, answer, ok=False)
    print(f"ok {root}: rollout files and state.json agree with the events", file=out)
    return _verify_answer(args, answer, ok=True)


def _verify_answer(args: argparse.Namespace, answer: dict[str, Any], *, ok: bool) -> int:
    if args.json:
        _print_json({**answer, "ok": ok})
    return 0 if ok else 1


def _verified_run(args: argparse.Namespace) -> RunDir:
    """``verify [PROJECT] [--run-id ID]``, or the older ``verify RUN_DIR`` (a folder holding
    ``events.jsonl``). Reads no spec: a run whose project's spec is broken can still be checked."""
    target = _loop_project(args)
    if (target / "events.jsonl").is_file():
        if args.run_id is not None:
            raise CliUsageError(f"{target} is a run dir already; give it, or PROJECT --run-id ID, not both")
        return RunDir(target.resolve())
    if not (target / SPEC_FILENAME).is_file():
        raise CliUsageError(
            f"no {SPEC_FILENAME} in {target.resolve()} (and it is not a run dir: no events.jsonl there); "
            "give the project: capevolve verify PROJECT [--run-id ID]"
        )
    try:
        return RunDir.resolve(target.resolve(), args.run_id, create=False)
    except RunDirError as exc:
        raise CliUsageError(str(exc)) from None


def cmd_runs(args: argparse.Namespace) -> int:
    """The project's runs, oldest first: best, iterations, spend, whether test is sealed."""
    from .._show.runs import list_runs, render_runs

    spec = _spec_of(args)
    rows = list_runs(spec.project_dir)
    if not rows:
        print(
            f"no run under {spec.project_dir / '.capevolve' / 'runs'} yet; evaluate first: "
            f"pytest --capevolve-run {spec.project_dir}",
            file=_human(args),
        )
    else:
        for line in render_runs(rows):
            print(line, file=_human(args))
    if args.json:
        _print_json(rows)
    return 0


def cmd_microcase_gen(args: argparse.Namespace) -> int:
    """Write a skeleton microcase from a failing rollout; pays nothing, copies no gold."""
    from .._engine.checks import ProjectEnv
    from .._project.adapter import AdapterError
    from .._project.candidate import TAG_RE
    from .._project.microcase import ID_RE, MICROCASES_DIR, MicrocaseError
    from .._project.microcase_gen import skeleton
    from .._store.record import RecordError, RolloutRecord
    from .._store.rundir import RUNS_DIR

    source = args.source.resolve()
    try:
        record = RolloutRecord.loads(source.read_text(encoding="utf-8"), str(source))
    except (OSError, RecordError) as exc:
        raise CliUsageError(f"not a rollout record (a rollouts/<split>/*.json file): {exc}") from None
    task_id = record.task_id
    if record.split == "test":
        raise CliUsageError(
            f"{source} is a test-split rollout; the test split is sealed, and a microcase made "
            "from it would steer the search with held-out data"
        )
    given = _loop_project(args) if args.project or args.project_option else None
    project = given.resolve() if given else _project_of(source, RUNS_DIR)
    try:
        env = ProjectEnv.load(project)
        gold = env.task(task_id).target
    except (MicrocaseError, AdapterError) as exc:
        raise CliUsageError(str(exc)) from None
    if not TAG_RE.match(args.cluster):
        raise CliUsageError(f"--cluster {args.cluster!r}: use letters, digits, '.', '-' or '_'")
    case_id = args.id or f"{args.cluster}-{task_id}"
    if not ID_RE.match(case_id):
        raise CliUsageError(f"microcase id {case_id!r} is not usable; give one with --id")
    out = (args.out or project / MICROCASES_DIR / f"{case_id}.yaml").resolve()
    capability = env.spec.capability_path.resolve()
    if out.is_relative_to(capability) and not out.is_relative_to(project / MICROCASES_DIR):
        raise CliUsageError(f"{out} is inside the capability folder {capability}, where a candidate reads")
    if out.exists():
        raise CliUsageError(f"{out} exists; choose another --id or --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        skeleton(record.to_json(), cluster=args.cluster, case_id=case_id, gold=gold, source=str(source))
    )
    print(
        f"wrote {out}: fill in its FILL_IN, then run: pytest {out.parent} --capevolve-candidate DIR",
        file=_human(args),
    )
    if args.json:
        _print_json({"wrote": out, "id": case_id, "cluster": args.cluster, "task_id": task_id})
    return 0


def _project_of(path: Path, runs_dir: Path) -> Path:
    """The project holding a run dir file: the folder above ``.capevolve/runs/``."""
    for folder in path.parents:
        if (folder / runs_dir).is_dir() and path.is_relative_to(folder / runs_dir):
            return folder
    raise CliUsageError(f"{path} is not inside a project's {runs_dir}; give --project")


# -- the optimize loop's primitives: spend, diagnose (one JSON object each; refusals exit 2) --------

LOOP_REFUSED = 2
LOOP_INCOMPLETE = 3  # hill-climb: an evaluation did not complete; --resume continues it
JSON_DIGITS = 6  # loop JSON: derived statistics to 6 decimals (stored files keep full precision)


def _loop_run(args: argparse.Namespace) -> tuple[Spec, RunDir]:
    spec = _spec_of(args)
    try:
        rundir = RunDir.resolve(spec.project_dir, args.run_id, create=False)
    except RunDirError as exc:
        raise LoopRefusal(str(exc)) from None
    _OPENED.append(rundir)  # what it finds damaged and handles is said on stderr at the end
    if rundir.splits() is None:
        raise LoopRefusal(
            f"run {rundir.run_id} has no frozen splits yet; evaluate first: pytest --capevolve-run "
            f"{spec.project_dir}"
        )
    return spec, rundir


def _loop_print(args: argparse.Namespace, report: dict[str, Any], table: Any) -> int:
    if args.table and args.json:
        raise LoopRefusal("--table and --json ask for two different outputs; give one")
    from .._show.numbers import rounded

    if args.table:
        for line in table(report):
            print(line)
    else:
        _print_json(rounded(report, JSON_DIGITS))
    return 0


def _refusals_exit_2(command: Any) -> Any:
    """Loop commands refuse with one line on stderr naming what and why, and exit 2."""
    import functools

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return int(command(args))
        except (LoopRefusal, CliUsageError, CandidateError) as exc:
            print(f"error: capevolve {args.command} refused: {exc}", file=sys.stderr)
            return LOOP_REFUSED

    return run


@_refusals_exit_2
def cmd_work_new(args: argparse.Namespace) -> int:
    """Copy the best's (or --from's) snapshot into runs/<id>/work/<TAG>/ for an optimizer to edit."""
    from .._loop.work import new_work_copy

    spec, rundir = _loop_run(args)
    answer = new_work_copy(spec, rundir, args.tag, args.parent)
    return _loop_print(args, answer, _key_lines)


@_refusals_exit_2
def cmd_commit(args: argparse.Namespace) -> int:
    """Book one decision for a tag: the gate's verdict is evidence, this is the decision."""
    from .._policy.commit import OptimizerSpend, book

    spec, rundir = _loop_run(args)
    spend = OptimizerSpend(args.optimizer_usd, args.optimizer_tokens, args.optimizer_seconds)
    entry = book(
        spec,
        rundir,
        args.tag,
        args.decision,
        basis=args.reject_basis,
        note=args.note,
        optimizer=spend,
        force=args.force,
    )
    return _loop_print(
        args, {**entry, "best": rundir.state.best(), "state": rundir.state.read_state()}, _key_lines
    )


@_refusals_exit_2
def cmd_baseline(args: argparse.Namespace) -> int:
    """The hand-off: check the adapter, evaluate the seed on val, print what an optimizer needs.

    Everything but the final JSON goes to stderr, so ``capevolve baseline | jq`` works."""
    import contextlib
    import subprocess

    from .._policy.spend import spend_report

    project = _loop_project(args)
    spec = _spec_of(args)
    with contextlib.redirect_stdout(sys.stderr):
        checked = argparse.Namespace(project=project, run_id=None, json=False, command="check")
        if cmd_check(checked) != 0:
            raise LoopRefusal(f"the adapter check of {project} failed (above); fix it before a baseline")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--capevolve-run",
        str(spec.path),
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    command += ["--capevolve-run-id", args.run_id] if args.run_id else []
    command += ["-n", str(args.workers)] if args.workers else []
    done = subprocess.run(command, cwd=spec.project_dir, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)  # all of it: what went wrong is in there
        raise LoopRefusal(f"the seed's val evaluation did not complete (pytest exit {done.returncode})")
    sys.stderr.write(_session_summary(done.stdout, command))
    spec, rundir = _loop_run(args)
    report = spend_report(spec, rundir)
    splits = rundir.splits() or {}
    where = str(spec.project_dir)
    handoff = {
        "run_id": rundir.run_id,
        "run_dir": str(rundir.root),
        "best": report["best"],
        "splits": {name: len(splits.get(name, [])) for name in ("train", "val", "test")},
        "trials": spec.num_trials,
        "ceilings": report["ceilings"],
        "constraints": report["constraints"],
        "recommendation": report["recommendation"],
        "next": [
            f"capevolve diagnose {report['best']['tag']} {where}",
            f"capevolve spend --n-siblings 3 {where}",
            f"capevolve work new cand_0001 {where}",
            f"pytest --capevolve-run {spec.project_dir} --capevolve-candidate "
            f"{rundir.work_dir('cand_0001')} --capevolve-gate --capevolve-commit none",
            f"capevolve commit cand_0001 {where} --decision accept|reject --reject-basis gate",
        ],
    }
    return _loop_print(args, handoff, _key_lines)


def _session_summary(output: str, command: list[str]) -> str:
    """A completed evaluation's summary table onward: its rollout-by-rollout lines (every task
    the seed failed) are what the hand-off is not about, and would bury it."""
    lines = output.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(r"=+ capevolve run ", line)), 0)
    left_out = f"(the rollout-by-rollout output is left out; `{' '.join(command[2:])}` shows it)\n"
    return "".join(lines[start:]) + (left_out if start else "")


def _key_lines(answer: dict[str, Any]) -> list[str]:
    from .._show.numbers import rounded

    return [f"{key}: {value}" for key, value in sorted(rounded(answer, 4).items())]


@_refusals_exit_2
def cmd_spend(args: argparse.Namespace) -> int:
    """Spend against every ceiling, whether N siblings fit, and stop / narrow / continue."""
    from .._policy.spend import render_table, spend_report

    if args.n_siblings < 1:
        raise LoopRefusal(f"--n-siblings {args.n_siblings}: give at least 1")
    spec, rundir = _loop_run(args)
    report = spend_report(spec, rundir, n_siblings=args.n_siblings, nulls=args.nulls)
    return _loop_print(args, report, render_table)


@_refusals_exit_2
def cmd_diagnose(args: argparse.Namespace) -> int:
    """A tag's per-task bands and failure clusters from persisted rollouts; pays nothing."""
    from .._loop.diagnose import diagnose, export_reflective, render_table

    spec, rundir = _loop_run(args)
    report = diagnose(spec, rundir, args.tag, split=args.split, compare_split=args.compare_split)
    if args.export is not None:
        report["export"] = export_reflective(spec, rundir, args.tag, args.export, split=args.split)
    return _loop_print(args, report, render_table)


@_refusals_exit_2
def cmd_hill_climb(args: argparse.Namespace) -> int:
    """The optimize loop that runs by itself: optimizer → guards → val gate → commit, repeated."""
    from .._loop.hill_climb import HillClimb as Loop
    from .._loop.hill_climb import LoopIncomplete, Options

    project = _loop_project(args)
    _spec_of(args)  # outside a project, say so before the loop starts
    options = Options(
        project=project,
        optimizer=args.optimizer,
        focus=args.focus,
        max_iterations=args.max_iterations,
        resume=args.resume,
        n_trials=args.n_trials,
        gate_mode=args.gate_mode,
        k_se=args.k_se,
        alpha=args.alpha,
        no_regression=args.no_regression,
        protected_paths=tuple(args.protected_paths or ()),
        capabilities=tuple(c for c in (args.capabilities or "").split(",") if c.strip()),
        convergence=args.convergence,
        workers=args.workers,
        store=args.store,
        store_commit_cmd=args.store_commit_cmd,
        instructions_file=args.instructions_file,
        optimizer_timeout=args.optimizer_timeout,
        run_id=args.run_id,
    )
    try:
        loop = Loop(options)
    except SpecError as exc:
        raise LoopRefusal(str(exc)) from None
    try:
        summary = loop.run()
    except LoopIncomplete as exc:
        print(f"capevolve hill-climb: incomplete: {exc}", file=sys.stderr)
        return LOOP_INCOMPLETE
    return _loop_print(args, summary, _hill_climb_lines)


def _hill_climb_lines(summary: dict[str, Any]) -> list[str]:
    lines = [f"capevolve hill-climb — run {summary['run_id']}"]
    for row in summary["iterations"]:
        numbers = ""
        if row["delta_mean"] is not None:
            numbers += f"  Δ̄ {round(row['delta_mean'], 4) + 0.0:+.4f}"  # never "-0.0000"
        if row["p_value"] is not None:
            numbers += f"  p {row['p_value']:.4g}"
        lines.append(f"{row['tag']}  {row['decision']:<11}{row['basis'] or '':<16}{numbers}")
    lines.append(f"best {summary['best']!r}; accepted: {', '.join(summary['accepted']) or 'none'}")
    lines.append(f"stopped: {summary['stopped']}")
    return lines


@_refusals_exit_2
def cmd_diff(args: argparse.Namespace) -> int:
    """What a candidate changed: a unified diff of two snapshots (default: against its parent)."""
    from .._loop.git_store import unified_diff

    _diff_operands(args)
    spec, rundir = _loop_run(args)
    if args.other is not None and (args.best or args.parent):
        raise LoopRefusal("give B, --best or --parent, not several")
    if args.other is not None:
        other = args.other
    elif args.best:
        other = rundir.state.best()
    else:
        decided = next((d for d in rundir.decisions() if d["tag"] == args.tag), None)
        verdict = rundir.verdicts.verdict(args.tag)
        other = (decided or {}).get("parent") or (verdict or {}).get("against")
        if other is None:
            raise LoopRefusal(f"{args.tag!r} has no recorded parent (no decision, no verdict); name B")

    def folder(tag: str) -> Path:
        if tag == "seed" and not rundir.snapshots.snapshot_dir(tag).is_dir():
            return spec.capability_path
        snapshot = rundir.snapshots.snapshot_dir(tag)
        if snapshot.is_dir():
            return snapshot
        source = ((rundir.verdicts.verdict(tag) or {}).get("details") or {}).get("source")
        if source and Path(source).is_dir():  # refused before any snapshot: its source folder
            return Path(source)
        if rundir.work_dir(tag).is_dir():
            return rundir.work_dir(tag)
        raise LoopRefusal(f"no snapshot or work copy of {tag!r} in run {rundir.run_id}")

    diff = unified_diff(folder(other), folder(args.tag), other, args.tag)
    if args.json:
        _print_json({"tag": args.tag, "other": other, "diff": diff})
    else:
        sys.stdout.write(diff)
    return 0


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
            raise LoopRefusal(f"diff takes A, then B and/or PROJECT; {operand!r} is one too many")


def _add_loop_commands(sub: Any) -> None:
    def common(parser: argparse.ArgumentParser) -> None:
        add_project_args(parser)
        parser.add_argument("--table", action="store_true", help="a short human table instead of JSON")

    from .._policy.commit import DECISIONS, REJECT_BASES

    work = sub.add_parser("work", help="work copies for an optimizer").add_subparsers(
        dest="action", required=True
    )
    new = work.add_parser("new", help="copy the best's snapshot into runs/<id>/work/TAG/")
    new.add_argument("tag")
    common(new)
    new.add_argument("--from", dest="parent", default=None, metavar="TAG", help="copy this tag instead")
    new.set_defaults(func=cmd_work_new)
    commit = sub.add_parser("commit", help="book one decision for a tag (the gate's verdict is evidence)")
    commit.add_argument("tag")
    common(commit)
    commit.add_argument("--decision", required=True, choices=DECISIONS)
    commit.add_argument("--reject-basis", choices=REJECT_BASES, default=None)
    commit.add_argument("--note", default="", help="one line: the general rule this decision teaches")
    commit.add_argument("--optimizer-usd", type=float, default=0.0)
    commit.add_argument("--optimizer-tokens", type=int, default=0)
    commit.add_argument("--optimizer-seconds", type=float, default=0.0)
    commit.add_argument("--force", action="store_true", help="repair the record (itself an event)")
    commit.set_defaults(func=cmd_commit)
    baseline = sub.add_parser(
        "baseline", help="check the adapter, evaluate the seed on val, print the hand-off"
    )
    common(baseline)
    baseline.add_argument("-n", "--workers", type=int, default=0, help="xdist workers for the evaluation")
    baseline.set_defaults(func=cmd_baseline)
    spend = sub.add_parser("spend", help="spend vs ceilings, whether N siblings fit, stop/narrow/continue")
    common(spend)
    spend.add_argument("--n-siblings", type=int, default=1, metavar="N", help="siblings to price (default 1)")
    spend.add_argument(
        "--nulls", type=int, default=2, metavar="N", help="null controls a round adds (default 2)"
    )
    spend.set_defaults(func=cmd_spend)
    diag = sub.add_parser("diagnose", help="a tag's per-task bands and failure clusters (pays nothing)")
    diag.add_argument("tag")
    common(diag)
    diag.add_argument("--split", default="val", help="val (default) or train; test is sealed")
    diag.add_argument(
        "--compare-split", default=None, metavar="SPLIT", help="compare clusters with train/val"
    )
    diag.add_argument(
        "--export", type=Path, default=None, metavar="FILE.jsonl", help="write the reflective dataset"
    )
    diag.set_defaults(func=cmd_diagnose)
    diff = sub.add_parser("diff", help="what a candidate changed: a unified diff of snapshots")
    diff.add_argument("tag")
    diff.add_argument(
        "operands", nargs="*", metavar="B|PROJECT", help="compare with tag B; the project folder (default .)"
    )
    diff.add_argument("--project", dest="project_option", type=Path, default=None, metavar="DIR")
    diff.add_argument("--run-id", default=None, help="a run of the project (default: the newest)")
    diff.add_argument("--json", action="store_true", help="print only JSON on stdout")
    diff.add_argument("--best", action="store_true", help="compare with the current best")
    diff.add_argument("--parent", action="store_true", help="compare with its parent (the default)")
    diff.set_defaults(func=cmd_diff)
    _add_hill_climb(sub, common)


def _add_hill_climb(sub: Any, common: Any) -> None:
    from .._decide.gate import GATE_MODES
    from .._loop.git_store import STORES
    from .._loop.prompt import FOCUS_MODES

    hc = sub.add_parser("hill-climb", help="the optimize loop: optimizer → guards → val gate → commit")
    common(hc)
    hc.add_argument("--optimizer", default=None, metavar="CMD", help="'CMD … {workdir} … {prompt}'")
    hc.add_argument("--focus", choices=FOCUS_MODES, default=None, help="which failing val tasks to aim at")
    hc.add_argument("--max-iterations", type=int, default=None, metavar="N", help="iterations in the run")
    hc.add_argument("--n-trials", type=int, default=None, metavar="K", help="trials (if the spec sets none)")
    hc.add_argument("--resume", action="store_true", help="finish an iteration a kill cut off")
    hc.add_argument("--gate-mode", choices=GATE_MODES, default=None)
    hc.add_argument("--k-se", type=float, default=None)
    hc.add_argument("--alpha", type=float, default=None)
    hc.add_argument("--no-regression", action="store_true", help="veto an accept that breaks a passing task")
    hc.add_argument("--protected-paths", nargs="+", default=None, metavar="GLOB", help="also protect these")
    hc.add_argument("--capabilities", default=None, metavar="A,B", help="the allowed edit surface")
    hc.add_argument("--convergence", action="store_true", help="stop on a long plateau (stall ≥ 5)")
    hc.add_argument("-n", "--workers", type=int, default=0, help="xdist workers for each gate session")
    hc.add_argument("--store", choices=STORES, default=None, help="where every candidate is committed")
    hc.add_argument("--store-commit-cmd", default=None, metavar="CMD", help="'CMD {msg} {dir} {tag}'")
    hc.add_argument("--instructions-file", type=Path, default=None, metavar="F", help="the prompt template")
    hc.add_argument("--optimizer-timeout", type=float, default=1800.0, metavar="S", help="seconds (1800)")
    hc.set_defaults(func=cmd_hill_climb)


def _spec_value(key: str) -> Any:
    """An argparse type that checks a flag as the spec checks its key (same validator, same
    range: ``--alpha`` is ``gate_alpha`` in (0, 0.25])."""
    from .._project.spec import VALIDATORS

    def parse(text: str) -> Any:
        try:
            return VALIDATORS[key](float(text))
        except ValueError as exc:
            expected = str(exc) if str(exc) and not str(exc).startswith("could not") else "a number"
            raise argparse.ArgumentTypeError(
                f"must be {expected} (as the spec's {key}), got {text!r}"
            ) from None

    parse.__name__ = key
    return parse


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; of ``command`` only, when it is one of :data:`CORE_COMMANDS`."""
    from .. import __version__
    from .._decide.gate import GATE_MODES

    parser = argparse.ArgumentParser(prog="capevolve", description=__doc__)
    parser.add_argument("--version", action="version", version=f"capevolve (pytest-capevolve) {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="verify a project's spec and adapter")
    add_project_args(check)
    check.set_defaults(func=cmd_check)
    gate = sub.add_parser("gate", help="re-derive a verdict from persisted rollouts (pays nothing)")
    gate.add_argument("tag")
    add_project_args(gate)
    gate.add_argument("--against", default=None, help="compare with this tag instead of the best")
    gate.add_argument("--gate-mode", choices=GATE_MODES)
    gate.add_argument("--k-se", type=_spec_value("gate_k_se"), default=None)
    gate.add_argument("--alpha", type=_spec_value("gate_alpha"), default=None)
    gate.add_argument("--veto-regressions", action="store_true")
    gate.set_defaults(func=cmd_gate)
    plan = sub.add_parser("plan", help="minimum detectable effect and headroom (pays nothing)")
    add_project_args(plan)
    plan.add_argument("--target", type=float, default=None, help="a target val mean to check")
    plan.set_defaults(func=cmd_plan)
    measure = sub.add_parser(
        "measure", help="the run's honest table and report.md (runs finalize once if needed)"
    )
    add_project_args(measure)
    measure.add_argument("--no-finalize", action="store_true", help="leave the test split sealed")
    measure.add_argument("-n", "--workers", type=int, default=0, help="xdist workers for finalize")
    measure.set_defaults(func=cmd_measure)
    verify = sub.add_parser(
        "verify", help="check a run's events.jsonl hash chain, rollout files and state.json"
    )
    add_project_args(verify)  # the positional may also be a run dir (the older form)
    verify.add_argument(
        "--repair",
        action="store_true",
        help="move a damaged events.jsonl tail aside; rebuild state.json from the events",
    )
    verify.set_defaults(func=cmd_verify)
    runs = sub.add_parser("runs", help="the project's runs: best, iterations, spend, test sealed")
    add_project_args(runs, run_id=False)
    runs.set_defaults(func=cmd_runs)
    micro = sub.add_parser("microcase", help="work with microcases").add_subparsers(
        dest="action", required=True
    )
    gen = micro.add_parser("gen", help="write a skeleton microcase from a failing rollout")
    add_project_args(gen, run_id=False)
    gen.add_argument("--from", dest="source", type=Path, required=True, metavar="ROLLOUT_FILE")
    gen.add_argument("--cluster", required=True, help="the failure cluster it guards")
    gen.add_argument("--id", default=None, help="microcase id (default CLUSTER-TASK)")
    gen.add_argument("--out", type=Path, default=None, help="default: PROJECT/microcases/ID.yaml")
    gen.set_defaults(func=cmd_microcase_gen)
    if command in CORE_COMMANDS:
        return parser
    _add_loop_commands(sub)
    from .._loop import merge, multirep  # noqa: I001 — each registers its own command
    from .._loop.cap_evolve.importer import add_command as add_import_cap_evolve
    from .._show.dashboard import command as dashboard

    dashboard.add_command(sub)
    add_import_cap_evolve(sub)
    multirep.add_command(sub)
    merge.add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(words[0] if words else None).parse_args(words)
    _OPENED.clear()
    try:
        return int(args.func(args))
    except (CliUsageError, RunDirError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 4
    finally:
        for rundir in _OPENED:
            for notice in rundir.notices:
                print(f"warning: {notice}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
