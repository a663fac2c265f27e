"""The items a session runs are its plan: checked once collection is over, before any rollout.

Controller only. Any plugin can drop, add, repeat or reorder items after we collect (a ``-p`` plugin dropped
70 of a finalize's 240 test rollouts after 170 were paid), so a session whose items are not its plan is
refused in one line, nothing paid. A finalize and every deciding session run the whole plan in order; a
session that decides nothing may run a subset (``-k``) in any order, but nothing unplanned or twice."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from .._items.nodes import RolloutItem, item_name
from .._items.plan import EvalPlan

NOT_A_ROLLOUT = "<not a planned rollout item> "


def planned_names(plan: EvalPlan) -> list[str]:
    """The owed rollouts as ``<split>::<task>[<tag>-t<k>]``, in item order."""
    return [f"{key.split}::{item_name(plan, key)}" for key in plan.owed_keys()]


def plan_problem(planned: list[str], collected: list[str], *, whole: bool) -> str | None:
    """What is wrong with ``collected`` against ``planned``, in a few words (None: nothing). ``whole``:
    every planned item, once each, in order; else a subset, once each."""
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
    """On the controller for every capevolve session; ``refusal``: the line that refused it (then
    :class:`.outcome.SessionEnd` concludes nothing)."""

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
        self._check_items(session)

    @pytest.hookimpl(tryfirst=True)  # after every run-loop wrapper's start, before the loop
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Again as the loop starts: a plugin's run-loop wrapper may edit the items before its ``yield``."""
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
        """Under xdist, before the scheduler sees a worker's ids: a refused session empties every worker's
        collection."""
        collected = []
        for nodeid in ids:
            file, _, rest = nodeid.partition("::")
            ours = rest and file.rsplit("/", 1)[-1] == self.spec_name
            collected.append(rest if ours else f"{NOT_A_ROLLOUT}{nodeid}")
        self._check(collected, f" on {getattr(getattr(node, 'gateway', None), 'id', 'a worker')}")
        if self.refusal is not None and isinstance(ids, list):
            ids[:] = []
