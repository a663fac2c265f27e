"""pytest's selection habits on a plain evaluation: node ids, ``--lf``, ``--ff``, ``-x``, ``--sw``.

A node id such as ``capevolve.yaml::val::q05[seed-t0]`` selects that rollout if the plan owes it. A failed
rollout is never drawn again because it failed (that would choose the draws), so naming one, or ``--lf``,
runs nothing; the controller says so and names what works. A deciding session refuses node ids."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from .._items.nodes import item_name
from .._items.plan import EvalPlan
from .plan_check import planned_names

# what to use instead of re-drawing a failed rollout, in every line that refuses to
INSTEAD = (
    "`capevolve diagnose TAG` shows what the failed rollouts did and why they failed; "
    "--capevolve-rerun measures everything again under fresh tags"
)


def named_rollouts(args: Sequence[str], spec_name: str) -> dict[str, str]:
    """``split::task[tag-tK]`` of each argument naming a node under the spec, in order, once, as typed."""
    named: dict[str, str] = {}
    for arg in args:
        file, sep, rest = str(arg).partition("::")
        if sep and rest and Path(file).name == spec_name:
            named.setdefault(rest, str(arg))
    return named


def other_node_ids(args: Sequence[str], spec_name: str) -> list[str]:
    """Node ids (``path::name``) that name nothing under the spec."""
    return [str(a) for a in args if "::" in str(a) and Path(str(a).partition("::")[0]).name != spec_name]


WORKERINPUT_KEY = "capevolve_selected"


class SelectionToWorkers:
    def __init__(self, selected: list[str]) -> None:
        self.selected = selected

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = json.dumps(self.selected)


def recorded_line(ids: list[str]) -> str:
    shown = ", ".join(ids[:3]) + (" …" if len(ids) > 3 else "")
    return (
        f"{shown} {'is' if len(ids) == 1 else 'are'} recorded already, so nothing is run for "
        f"{'it' if len(ids) == 1 else 'them'}: a recorded rollout is never drawn again (re-drawing "
        f"the failed ones would choose the draws); {INSTEAD}"
    )


def notes(
    config: pytest.Config, plan: EvalPlan, named: dict[str, str], spec_name: str
) -> tuple[list[str], list[str]]:
    """Controller only: (the named rollouts the plan owes, lines about the rest and ``--lf``/``--ff``)."""
    owed = set(planned_names(plan))
    recorded = {f"{k.split}::{item_name(plan, k)}" for k in plan.all_keys()} - owed
    selected = [rest for rest in named if rest in owed]
    lines = []
    done = [typed for rest, typed in named.items() if rest in recorded]
    if done:
        lines.append(recorded_line(done))
    unknown = [typed for rest, typed in named.items() if rest not in owed and rest not in recorded]
    unknown += other_node_ids(config.args, spec_name)
    if unknown:  # a FAILED line's id pasted without its candidate: say how to name it
        tag = unknown[0].rpartition("[")[2].rpartition("-t")[0]
        add = f"its tag {tag!r} is not in it: add --capevolve-candidate with its folder, or "
        lines.append(
            f"{unknown[0]}{' and others' if len(unknown) > 1 else ''} names no rollout of this session's "
            f"plan, so nothing is run for it ({add if tag and tag not in plan.tags() else ''}"
            "`pytest --co` with the same options lists the ids it owes)"
        )
    option = config.option
    flags = (("--lf", getattr(option, "lf", False)), ("--ff", getattr(option, "failedfirst", False)))
    asked = [flag for flag, on in flags if on]
    if asked:
        lines.append(
            f"{' and '.join(asked)}: no rollout the agent failed is run again; a failed rollout is "
            f"recorded and never drawn again because it failed (that would choose the draws); {INSTEAD}"
        )
    return selected, lines


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


def stopped_line(flag: str, *, missing: bool) -> str:
    then = f"a run without {flag}{' (the command above)' if missing else ''} completes the rest"
    return (
        f"stopped early by {flag} at a failed rollout (a task the agent fails is data, "
        f"not a bug); {then}, reusing every rollout paid"
    )


class NothingNamedIsOwed:
    """On the controller when no node id names an owed rollout: the spec is collected, none of it run."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if items:
            config.hook.pytest_deselected(items=list(items))
            items[:] = []
