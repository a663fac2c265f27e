"""Commands about decisions: ``gate`` (re-derive a verdict from persisted rollouts; exits as a
gate session would), ``commit`` (book one decision) and ``baseline`` (the hand-off: check,
evaluate the seed on val, print what an optimizer needs).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import exitcodes
from .._project.spec import Spec
from .._project.way_on import commit_command, shown
from .._store.files import collection_paused
from .._store.rundir import RunDir
from .common import (
    Refusal,
    UsageError,
    add_project_args,
    emit,
    open_run,
    project_of,
    said_as,
    spec_of,
    val_ids,
)


def _frozen_run(args: argparse.Namespace) -> tuple[Spec, RunDir]:
    """:func:`.common.open_run` with the run's frozen files checked as a session checks them,
    so a damaged one is refused in one line."""
    spec, rundir = open_run(args)
    if rundir.spec_lock_path.is_file():  # a run with no lock is found, and said, by open_run's reader
        rundir.ensure_spec_lock(spec)
    for tag in rundir.snapshots.known_tags():
        rundir.snapshots.candidate_hash(tag)
    return spec, rundir


@collection_paused()  # it holds every val outcome of the two arms until it prints
def cmd_gate(args: argparse.Namespace) -> int:
    """Re-derive a verdict from persisted val rollouts; pays no rollout."""
    from .._decide.alpha_budget import shown_decision
    from .._policy.gate.regate import GateAsk, regate, unjudged
    from .._show.report import render_verdicts

    spec, rundir = _frozen_run(args)
    ask = GateAsk(args.tag, args.against, args.gate_mode, args.k_se, args.alpha, args.veto_regressions)
    with said_as(UsageError, Refusal):  # an unknown tag is bad input, as a missing project is
        verdict = regate(spec, rundir, val_ids(rundir), ask)
    what_if = (verdict.details or {}).get("what_if")
    if what_if:  # an answer under settings the decision did not have: never read as one
        from dataclasses import replace

        shown = replace(verdict, decision="what-if")
        answer = {**verdict.to_dict(), "decision": "what-if", "what_if": what_if}
        emit(args, answer, lambda _: [what_if["line"], *render_verdicts([shown])])
        return exitcodes.WHAT_IF
    emit(args, verdict.to_dict(), lambda _: render_verdicts([verdict]))
    if (cut_off := unjudged(rundir, verdict)) is not None:
        print(cut_off, file=sys.stderr)
    looks = (verdict.details or {}).get("looks")
    return exitcodes.for_decisions(
        [shown_decision(verdict.decision, verdict.basis, verdict.delta_mean, looks)]
    )


def cmd_commit(args: argparse.Namespace) -> int:
    """Book one decision for a tag: the gate's verdict is evidence, this is the decision."""
    from .._policy.booking.commit import OptimizerSpend, book

    # a spend that is not one (negative, NaN, absurd) is refused before the run is opened
    spend = OptimizerSpend(args.optimizer_usd, args.optimizer_tokens, args.optimizer_seconds)
    spec, rundir = _frozen_run(args)
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
    answer = {**entry, "best": rundir.state.best(), "state": rundir.state.read_state()}
    return emit(args, answer, key_lines, json_default=True)


def cmd_baseline(args: argparse.Namespace) -> int:
    """The hand-off: check the adapter, evaluate the seed on val, print what an optimizer needs
    (all but the final JSON to stderr, so ``capevolve baseline | jq`` works)."""
    from .._loop.launch import run_captured, session_command
    from .._policy.alpha.gate_settings import handoff_schedule_note
    from .._policy.budget.spend import spend_report
    from .project import cmd_check

    project = project_of(args)
    spec = spec_of(args)
    with contextlib.redirect_stdout(sys.stderr):
        checked = argparse.Namespace(project=project, run_id=None, json=False, command="check")
        if cmd_check(checked) != exitcodes.OK:
            raise Refusal(  # baseline takes no new-run flag: a session starts the new run
                f"the adapter check of {project} failed (above); fix it before a baseline (a FAIL line that "
                "says the harness changed or the seed was edited since a run began: `pytest --capevolve-run "
                f"{shlex.quote(str(project))} --capevolve-new-run -q` starts a new run, then run this again)"
            )
    quiet = ("-q", "-p", "no:cacheprovider")  # pytest's traceback too: a failed evaluation shows all
    command = session_command(spec.path, run_id=args.run_id, quiet=quiet, workers=args.workers)
    done = run_captured(command, spec.project_dir)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)  # all of it: what went wrong is in there
        raise Refusal(f"the seed's val evaluation did not complete (pytest exit {done.returncode})")
    spec, rundir = open_run(args)
    report = spend_report(spec, rundir, loop=True)  # the hand-off's gates take the loop's schedule
    sys.stderr.write(_session_summary(done.stdout, report["best"]["tag"], spec.project_dir))
    sys.stderr.write(f"resolution: {report['resolution']['sentence']}\n")
    sys.stderr.write(f"min effect: {report['resolution']['min_effect']['sentence']}\n")
    if note := handoff_schedule_note(spec, rundir):
        sys.stderr.write(f"schedule: {note}\n")
    sys.stderr.write(f"headroom: {report['headroom']['verdict']} — {report['headroom']['reason']}\n")
    return emit(args, _handoff(spec, rundir, report), key_lines, json_default=True)


def _handoff(spec: Spec, rundir: RunDir, report: Mapping[str, Any]) -> dict[str, Any]:
    """What an optimizer needs to start: the run, the best, the budget, the next commands."""
    splits = rundir.splits() or {}
    # each hint pastes as one valid shell command: paths quoted, one decision per line (an
    # "accept|reject" choice would paste as a pipe)
    # and this run's, whatever run of the project is the newest when a hint is pasted
    where = f"{shlex.quote(str(spec.project_dir))} --run-id {shlex.quote(rundir.run_id)}"
    work = shlex.quote(str(rundir.work_dir("cand_0001")))
    run = (spec.project_dir, rundir.run_id)
    return {
        "run_id": rundir.run_id,
        "run_dir": str(rundir.root),
        "best": report["best"],
        "splits": {name: len(splits.get(name, [])) for name in ("train", "val", "test")},
        "trials": spec.num_trials,
        "ceilings": report["ceilings"],
        "constraints": report["constraints"],
        "recommendation": report["recommendation"],
        "resolution": report["resolution"],
        "headroom": report["headroom"],
        "next": [
            f"capevolve diagnose {shlex.quote(report['best']['tag'])} {where}",
            f"capevolve spend --n-siblings 3 {where}",
            f"capevolve work new cand_0001 {where}",
            # `capevolve pytest` works inside `capevolve agent` and outside; no `-o` (the broker
            # refuses one): a run holding work copies gates at the loop's schedule by itself
            f"capevolve pytest --capevolve-run {shlex.quote(str(spec.project_dir))} --capevolve-run-id "
            f"{shlex.quote(rundir.run_id)} --capevolve-candidate {work} --capevolve-gate "
            "--capevolve-commit none",
            commit_command("cand_0001", "accept", *run, absolute=True),
            commit_command("cand_0001", "reject", *run, "--reject-basis", "gate", absolute=True),
        ],
    }


def _session_summary(output: str, best: str, project: Path) -> str:
    """A completed evaluation's output from its summary table on (rollout lines would bury it)."""
    lines = output.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(r"=+ capevolve run ", line)), 0)
    # the session run again would reuse every rollout and list none: diagnose reads them back
    diagnose = shlex.join(["capevolve", "diagnose", best, shown(project), "--table"])
    left_out = f"(the rollout-by-rollout output is left out; `{diagnose}` shows the failed ones and why)\n"
    return "".join(lines[start:]) + (left_out if start else "")


def key_lines(answer: dict[str, Any], prefix: str = "") -> list[str]:
    """The ``--table`` form of an answer: one ``key: value`` line per key, 4 decimals; a nested
    answer's keys dotted (``best.tag: seed``), where a Python dict was printed whole."""
    from .._show.numbers import rounded

    lines = []
    for key, value in sorted(rounded(answer, 4).items()):
        if isinstance(value, dict) and value:
            lines += key_lines(value, f"{prefix}{key}.")
        else:
            lines.append(f"{prefix}{key}: {value}")
    return lines


def spec_value(key: str) -> Any:
    """An argparse type checking a flag as the spec checks its key (``--alpha`` as ``gate_alpha``)."""
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


def register(sub: Any) -> None:
    """``gate``, ``commit`` and ``baseline`` on the ``capevolve`` parser."""
    from .._decide.gate import GATE_MODES
    from .._policy.booking.commit import DECISIONS, REJECT_BASES

    gate = sub.add_parser("gate", help="re-derive a verdict from persisted rollouts (pays nothing)")
    gate.add_argument("tag")
    add_project_args(gate)
    gate.add_argument("--against", help="compare with this tag instead of the best")
    gate.add_argument("--gate-mode", choices=GATE_MODES)
    gate.add_argument("--k-se", type=spec_value("gate_k_se"))
    gate.add_argument("--alpha", type=spec_value("gate_alpha"))
    gate.add_argument("--veto-regressions", action="store_true")
    gate.set_defaults(func=cmd_gate)
    # commit and baseline: loop primitives (JSON by default, --table for people)
    commit = sub.add_parser("commit", help="book one decision for a tag (the gate's verdict is evidence)")
    commit.add_argument("tag")
    loop_arguments(commit)
    commit.add_argument("--decision", required=True, choices=DECISIONS)
    commit.add_argument("--reject-basis", choices=REJECT_BASES)
    commit.add_argument("--note", default="", help="one line: the general rule this decision teaches")
    commit.add_argument("--optimizer-usd", type=float, default=0.0)
    commit.add_argument("--optimizer-tokens", type=int, default=0)
    commit.add_argument("--optimizer-seconds", type=float, default=0.0)
    commit.add_argument("--force", action="store_true", help="repair the record (itself an event)")
    commit.set_defaults(func=cmd_commit, refusals=True)
    baseline = sub.add_parser(
        "baseline", help="check the adapter, evaluate the seed on val, print the hand-off"
    )
    loop_arguments(baseline)
    baseline.add_argument("-n", "--workers", type=int, default=0, help="xdist workers for the evaluation")
    baseline.set_defaults(func=cmd_baseline, refusals=True)


def loop_arguments(parser: argparse.ArgumentParser) -> None:
    """A loop primitive's arguments: the project's, and ``--table``."""
    add_project_args(parser)
    parser.add_argument("--table", action="store_true", help="a short human table instead of JSON")
