"""The items a session runs are its plan: checked once collection is over, before any rollout.

Controller only. pytest lets any plugin change what runs after we collected it — drop items in
``pytest_collection_modifyitems`` (announcing them through ``pytest_deselected``, or not), add
items of its own, repeat or reorder ours. A ``-p`` plugin from outside the project dropped 70
of a finalize's 240 test rollouts: 170 were paid, and their rewards read, before the finalize
found the rest missing. So the items that survived every plugin are compared with the plan
when collection finishes — in-process after the last ``pytest_collection_finish``, under xdist
when each worker reports the ids it collected (the controller collects nothing) — and a
session whose items are not its plan is refused in one line, with nothing paid.

How strict depends on what the session does with its rollouts. A finalize and every session
that decides (a gate, a sequential gate, grow, a screen) runs its whole plan in the plan's
order: a gate must decide on the whole val set it planned (dropping the tasks a candidate
loses is the same attack on the gate), and a sequential gate's order is its secret. A session
that decides nothing may run part of its plan (``-k``: a later gate pays the rest) in any
order, but never an item the plan does not hold, nor one twice.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from .._items.nodes import RolloutItem, item_name
from .._items.plan import EvalPlan

NOT_A_ROLLOUT = "<not a planned rollout item> "


def planned_names(plan: EvalPlan) -> list[str]:
    """The owed rollouts as ``<split>::<task>[<tag>-t<k>]``, in item order: each item's node id
    after the spec file's."""
    return [f"{key.split}::{item_name(plan, key)}" for key in plan.owed_keys()]


def plan_problem(planned: list[str], collected: list[str], *, whole: bool) -> str | None:
    """What is wrong with ``collected`` against ``planned``, in a few words (None: nothing).
    ``whole``: every planned item, each once, in the plan's order; else a subset, each once."""
    if collected == planned:
        return None
    want, got = Counter(planned), Counter(collected)
    problems = []
    gained = [name for name in got if name not in want]
    if gained:
        problems.append(f"{len(gained)} item(s) the plan does not hold (first: {gained[0]!r})")
    repeated = [name for name, n in got.items() if name in want and n > want[name]]
    if repeated:
        problems.append(
            f"{len(repeated)} planned rollout(s) collected more than once (first: {repeated[0]!r})"
        )
    if whole:
        lost = [name for name in planned if name not in got]
        if lost:
            problems.append(
                f"{len(lost)} of {len(planned)} planned rollouts not collected (first: {lost[0]!r})"
            )
        if not problems:
            problems.append("the planned rollouts in another order than the plan's")
    return "; ".join(problems) or None


class PlanCheck:
    """Registered on the controller for every capevolve session; ``refusal`` is the line that
    refused it (read by :class:`.outcome.SessionEnd`, which then concludes nothing)."""

    def __init__(self, plan: EvalPlan, spec_name: str, *, whole: bool, session_kind: str) -> None:
        self.plan = plan
        self.spec_name = spec_name
        self.whole = whole
        self.session_kind = session_kind
        self.refusal: str | None = None
        # the names taken now, as the plan is made: a plugin that edits the plan object later
        # (its persisted set, its task ids) changes what is collected, not what is expected
        self._planned = planned_names(plan)
        self._checked = False  # the last check passed (in-process): nothing to compare again

    def _check(self, collected: list[str], where: str) -> None:
        if self.refusal is not None or self._checked:
            return
        problem = plan_problem(self._planned, collected, whole=self.whole)
        if problem is None:
            return
        rule = (
            "runs its whole plan, each rollout once, in the plan's order"
            if self.whole
            else "runs only rollouts of its plan, each once"
        )
        self.refusal = (
            f"capevolve: the items collected{where} are not this session's plan ({self.session_kind} "
            f"{rule}): {problem}; refused before any rollout was paid (a plugin's "
            "pytest_collection_modifyitems, pytest_deselected or selection option changed them: "
            "run without it)"
        )

    @pytest.hookimpl(trylast=True)  # after every other plugin's collection_finish
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """In-process (no xdist): the items pytest will run, by what they are (their key)."""
        self._check_items(session)

    @pytest.hookimpl(tryfirst=True)  # after every run-loop wrapper's start, before the loop
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Again as the loop starts: a plugin's run-loop wrapper edited the items after
        collection finished (its ``session.items[:] = ...`` before its ``yield``)."""
        self._check_items(session)
        if session.config.pluginmanager.getplugin("dsession") is None:
            self._planned = []  # checked for the last time: not held while the rollouts run
            self._checked = True

    def _check_items(self, session: pytest.Session) -> None:
        if session.config.pluginmanager.getplugin("dsession") is not None:
            return  # xdist's controller collects nothing: its workers' ids are checked below
        if session.config.option.collectonly:
            return
        plan = self.plan
        collected = [
            f"{item.key.split}::{item_name(plan, item.key)}"
            if type(item) is RolloutItem
            else f"{NOT_A_ROLLOUT}{item.nodeid}"
            for item in session.items
        ]
        self._check(collected, "")
        if self.refusal is not None:
            raise pytest.UsageError(self.refusal)

    @pytest.hookimpl(optionalhook=True, trylast=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Under xdist, before the scheduler sees a worker's ids: a session refused schedules
        nothing (every worker's collection is emptied), and ends in the refusal's line."""
        collected = []
        for nodeid in ids:
            file, _, rest = nodeid.partition("::")
            ours = rest and file.rsplit("/", 1)[-1] == self.spec_name
            collected.append(rest if ours else f"{NOT_A_ROLLOUT}{nodeid}")
        self._check(collected, f" on {getattr(getattr(node, 'gateway', None), 'id', 'a worker')}")
        if self.refusal is not None and isinstance(ids, list):
            ids[:] = []
