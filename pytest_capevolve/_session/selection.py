"""pytest's selection options in a capevolve session: what an evaluation makes of them, what a gate refuses.

A node id such as ``capevolve.yaml::val::q05[seed-t0]`` selects that rollout if the plan owes it. A failed
rollout is never drawn again because it failed (that would choose the draws), so naming one, or ``--lf``,
runs nothing; the controller says so and names what works. A finalize scores its whole test plan and a
deciding session decides on its whole val plan, so any selection that would leave part of it unrun is
refused before anything is paid (a ``--deselect`` of one test rollout once left the seal unburned after the
test mean was on disk). The command that resumes a session, or completes its missing rollouts, is the one
typed, pinned to the run, without what deselected or stopped rollouts."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from .._items.nodes import item_name
from .._items.plan import EvalPlan
from .._project.candidate import null_control_of
from .._project.splits import SPLITS, TestSealError
from .._project.way_on import candidate_folder, diagnose_commands, pasteable
from .plan_check import planned_names


def instead(tags: Sequence[str], project_dir: Path | None) -> str:
    """What to use instead of re-drawing a failed rollout, in every line that refuses to: the diagnose
    command of the tags concerned, pasteable as printed (a ``TAG`` placeholder was not)."""
    commands = diagnose_commands(tags, project_dir) or "`capevolve diagnose TAG`"
    return (
        f"{commands} shows what the failed rollouts did and why they failed; "
        "--capevolve-rerun measures everything again under fresh tags"
    )


def tag_of(rest: str) -> str:
    """The tag of a rollout's ``split::task[tag-tK]`` (a rerun's: its fresh tag)."""
    return rest.rpartition("[")[2].rpartition("-t")[0]


def rollout_named(arg: str, spec_name: str) -> str | None:
    """``split::task[tag-tK]`` that ``arg`` names under the spec: as a FAILED line prints it
    (``capevolve.yaml::val::…``), or without the spec's file (``val::…``, no such file here)."""
    file, sep, rest = arg.partition("::")
    if sep and rest and Path(file).name == spec_name:
        return rest
    return arg if sep and rest and file in SPLITS and not Path(file).exists() else None


def named_rollouts(args: Sequence[str], spec_name: str) -> dict[str, str]:
    """``split::task[tag-tK]`` of each argument naming a node under the spec, in order, once, as typed."""
    named: dict[str, str] = {}
    for arg in map(str, args):
        if (rest := rollout_named(arg, spec_name)) is not None:
            named.setdefault(rest, arg)
    return named


WORKERINPUT_KEY = "capevolve_selected"


class SelectionToWorkers:
    def __init__(self, selected: list[str]) -> None:
        self.selected = selected

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = json.dumps(self.selected)


def recorded_line(ids: list[str], project_dir: Path | None = None) -> str:
    shown = ", ".join(ids[:3]) + (" …" if len(ids) > 3 else "")
    return (
        f"{shown} {'is' if len(ids) == 1 else 'are'} recorded already, so nothing is run for "
        f"{'it' if len(ids) == 1 else 'them'}: a recorded rollout is never drawn again (re-drawing "
        f"the failed ones would choose the draws); {instead([tag_of(i) for i in ids], project_dir)}"
    )


def in_this_rerun(rest: str, tags: set[str]) -> str:
    """``split::task[tag-tK]`` named under the fresh tag a ``--capevolve-rerun`` gave its candidate
    (``val::t36[convert-units-t2]`` → ``val::t36[convert-units-r2-t2]``); as it is when its tag is
    planned or no one planned tag is a rerun of it."""
    found = re.fullmatch(r"(.*)\[(.+?)-((?:b\d+-)?t\d+)\]", rest)
    if found is None or found[2] in tags:
        return rest
    base = re.sub(r"-r\d+$", "", found[2])
    fresh = [tag for tag in tags if re.fullmatch(rf"{re.escape(base)}-r\d+", tag)]
    return f"{found[1]}[{fresh[0]}-{found[3]}]" if len(fresh) == 1 else rest


def notes(
    config: pytest.Config,
    plan: EvalPlan,
    named: dict[str, str],
    spec_name: str,
    project_dir: Path | None = None,
) -> tuple[list[str], list[str]]:
    """Controller only: (the named rollouts the plan owes, lines about the rest and ``--lf``/``--ff``)."""
    lines: list[str] = []
    # the plan's names, owed and recorded, matter only to rollouts named: not built otherwise (60,000
    # names on a resume of a large run)
    owed = set(planned_names(plan)) if named else set()
    if getattr(config.option, "capevolve_rerun", False):  # a FAILED id pasted: its candidate's fresh tag
        named = _renamed_for_rerun(named, plan, owed, lines)
    recorded = ({f"{k.split}::{item_name(plan, k)}" for k in plan.all_keys()} - owed) if named else set()
    selected = [rest for rest in named if rest in owed]
    done = [typed for rest, typed in named.items() if rest in recorded]
    if done:
        lines.append(recorded_line(done, project_dir))
    nameless = {rest: typed for rest, typed in named.items() if rest not in owed and rest not in recorded}
    # node ids (``path::name``) that name nothing under the spec
    others = [a for a in map(str, config.args) if "::" in a and rollout_named(a, spec_name) is None]
    nameless.update((other, other) for other in others)
    if nameless:
        lines.append(_names_nothing_line(nameless, plan, project_dir))
    option = config.option
    flags = (("--lf", getattr(option, "lf", False)), ("--ff", getattr(option, "failedfirst", False)))
    asked = [flag for flag, on in flags if on]
    if asked:
        lines.append(
            f"{' and '.join(asked)}: no rollout the agent failed is run again; a failed rollout is "
            f"recorded and never drawn again because it failed (that would choose the draws), while what "
            f"the run still owes is paid as without it; {instead(_diagnosed(plan), project_dir)}"
        )
    return selected, lines


def _diagnosed(plan: EvalPlan) -> list[str]:
    """The plan's tags whose failed rollouts a user asks about: its candidates before its null controls."""
    tags = [c.tag for c in plan.candidates]
    return sorted(tags, key=lambda tag: null_control_of(tag) is not None)


def _renamed_for_rerun(
    named: dict[str, str], plan: EvalPlan, owed: set[str], lines: list[str]
) -> dict[str, str]:
    """``named`` under the fresh tags ``--capevolve-rerun`` gave their candidates; a line when any moved."""
    renamed = {rest: in_this_rerun(rest, plan.tags()) for rest in named}
    named = {renamed[rest]: typed for rest, typed in named.items()}
    moved = [f"{named[new]} as {new}" for rest, new in renamed.items() if new != rest and new in owed]
    if moved:
        lines.append(
            f"--capevolve-rerun gives each candidate a fresh tag: {', '.join(moved[:3])}"
            f"{' …' if len(moved) > 3 else ''} is run (a fresh rollout; the one recorded stays)"
        )
    return named


def _names_nothing_line(nameless: dict[str, str], plan: EvalPlan, project_dir: Path | None) -> str:
    """A FAILED line's id pasted without its candidate (or naming nothing): how to name it."""
    unknown = list(nameless.values())
    tag = tag_of(next(iter(nameless)))
    # a FAILED id's tag: what its failed rollouts did is one command away, not another session
    diagnose = diagnose_commands([tag], project_dir)
    add = (
        f"its tag {tag!r} is not in it: {diagnose} shows what its failed rollouts did and why; "
        f"{_how_to_owe(tag, project_dir)}; or "
    )
    return (
        f"{unknown[0]}{' and others' if len(unknown) > 1 else ''} names no rollout of this session's "
        f"plan, so nothing is run for it ({add if tag and tag not in plan.tags() else ''}"
        "`pytest --co` with the same options lists the ids it owes)"
    )


def stopped_early(config: pytest.Config, session: pytest.Session, exc: BaseException | None) -> str | None:
    """The option that stopped the loop at a failed rollout (``-x``, ``--maxfail N``, ``--sw``), else None."""
    option = config.option
    maxfail = int(getattr(option, "maxfail", 0) or 0)
    said = str(exc or "")
    if maxfail and (isinstance(exc, session.Failed) or said.startswith("stopping after ")):
        return "-x" if maxfail == 1 else f"--maxfail {maxfail}"
    if getattr(option, "stepwise", False) and (
        isinstance(exc, session.Interrupted) or "continuing from this test next run" in said
    ):
        return "--sw"
    return None


def stopped_line(flag: str) -> str:
    return (
        f"stopped early by {flag} at a failed rollout (a task the agent fails is data, "
        f"not a bug); a run without {flag} (the command above) completes the rest, reusing every rollout paid"
    )


class NothingNamedIsOwed:
    """On the controller when no node id names an owed rollout: the spec is collected, none of it run."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if items:
            config.hook.pytest_deselected(items=list(items))
            items[:] = []


def selection_asked(config: pytest.Config, *, marks: bool = True) -> list[str]:
    """The options and arguments that run less than every collected item. ``marks``: ``-m`` too (left out,
    the plan check refuses it only if it deselects a rollout)."""
    option = config.option
    asked = []
    if getattr(option, "keyword", ""):
        asked.append(f"-k {option.keyword!r}")
    markexpr: str = getattr(option, "markexpr", "")
    if marks and markexpr:
        asked.append(f"-m {markexpr!r}")
    asked += [f"--deselect {node!r}" for node in getattr(option, "deselect", None) or []]
    asked += [f"node id {arg!r}" for arg in config.args if "::" in str(arg)]
    for flag, name in (
        ("lf", "--lf/--last-failed"),
        ("failedfirst", "--ff/--failed-first"),
        ("newfirst", "--new-first"),
        ("stepwise", "--stepwise"),
        ("maxfail", "-x/--maxfail"),
    ):
        if getattr(option, flag, None):
            asked.append(name)
    return asked


def deselecting(config: pytest.Config) -> list[str]:
    """What was given that deselects rollouts (``-k``, ``-m``, ``--deselect``, node ids, ``--lf``,
    ``--sw``), as typed; read before the node ids are replaced by the rollouts they select."""
    stops = ("--ff/--failed-first", "--new-first", "-x/--maxfail")  # these order or stop, never deselect
    return [asked for asked in selection_asked(config) if asked not in stops]


def refuse_partial(config: pytest.Config, run_id: str, project_dir: Path | None) -> None:
    asked = selection_asked(config) + ["--collect-only"] * config.option.collectonly  # (it names test ids)
    if asked:
        raise TestSealError(
            f"run {run_id}: a finalize runs the whole test plan, so {', '.join(asked[:3])} is refused "
            "before any test rollout (part of the test split, or its task ids, would show without "
            f"burning the seal); run {pasteable('pytest --capevolve-finalize PROJECT', project_dir)} with no "
            "selection"
        )


def refuse_selection(config: pytest.Config, session_kind: str) -> None:
    """A deciding session (gate, grow, screen) decides on its whole val plan (``-k "not n07"`` once dropped
    the task a candidate loses): a one-line UsageError before anything is paid."""
    asked = selection_asked(config, marks=False)  # rollouts carry no marks: -m drops none
    if asked:
        raise pytest.UsageError(
            f"capevolve: {session_kind} decides on the whole val set of its plan, so "
            f"{', '.join(asked[:3])} is refused before any rollout (a selection would choose which "
            "tasks it decides on); run it with no selection (a session that decides nothing may "
            "evaluate a subset)"
        )


# options that take a value, and the flags, that the resume command replaces
_VALUED = ("--capevolve-run-id", "--capevolve-candidate", "--capevolve-tag")
_FLAGS = ("--capevolve-new-run", "--capevolve-rerun")
# what deselects rollouts: left out of the command that completes the missing ones
_DESELECTING_VALUED = ("-k", "-m", "--deselect", "--maxfail")
_DESELECTING_FLAGS = tuple(
    "--lf --last-failed --ff --failed-first -x --exitfirst --sw --stepwise --stepwise-skip".split()
)
# pytest's short flags that take no value: ``-xq`` is ``-x -q`` (the ``x`` left out, the rest kept)
_SHORT_FLAGS = frozenset("vqslx")


def _without(args: Sequence[str], valued: Sequence[str], flags: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            continue
        if arg in flags:
            continue
        if arg in valued:
            skip_value = True
            continue
        if any(arg.startswith(f"{option}=") for option in valued):
            continue
        if any(len(option) == 2 and arg.startswith(option) for option in valued):
            continue  # a short option joined to its value: -k"not slow"
        kept.append(arg)
    return kept


def _without_stops(args: Sequence[str]) -> list[str]:
    """``args`` without the node ids that select rollouts and without ``-x`` in a cluster of short flags
    (``-xvs`` → ``-vs``); after ``--``, untouched."""
    kept: list[str] = []
    for arg in args:
        if "::" in arg and not arg.startswith("-"):
            continue  # a rollout's node id: the rest is missing too
        letters = arg[1:]
        if arg.startswith("-") and not arg.startswith("--") and len(letters) > 1 and "x" in letters:
            if set(letters) <= _SHORT_FLAGS:
                arg = "-" + letters.replace("x", "")
        kept.append(arg)
    return kept


def resume_command(
    args: Sequence[str],
    run_id: str,
    *,
    rerun_candidates: Sequence[tuple[str, Path]] = (),
    complete: bool = False,
) -> str:
    """``pytest ARGS`` as typed, minus ``--capevolve-new-run``, pinned to ``run_id``; a
    ``--capevolve-rerun``'s candidates named by their fresh tags. ``complete``: without the deselecting
    flags."""
    rerun = "--capevolve-rerun" in args
    valued = _VALUED if rerun else ("--capevolve-run-id",)
    kept = _without(args, valued, _FLAGS)
    if complete:
        kept = _without_stops(_without(kept, _DESELECTING_VALUED, _DESELECTING_FLAGS))
    for tag, folder in rerun_candidates if rerun else ():
        kept += ["--capevolve-candidate", str(folder), "--capevolve-tag", tag]
    return shlex.join(["pytest", *kept, "--capevolve-run-id", run_id])


def _how_to_owe(tag: str, project_dir: Path | None) -> str:
    """How a session comes to owe ``tag``'s rollouts: a null control's only by a gate (it has no folder to
    name), a candidate's with its folder (the project's ``candidates/TAG`` when there is one)."""
    best = null_control_of(tag)
    if best is not None:
        return (
            f"{tag!r} is a null control (a copy of {best!r}): only a gate session (--capevolve-gate) pays "
            "its rollouts, and never one named alone"
        )
    named = candidate_folder(tag, project_dir, "its folder")
    return f"to run one the run still owes, add --capevolve-candidate {named}"
