"""At concurrency 1: the next rollout's request sent ahead, while this process handles the last.

The next item's request goes to the same sandbox child once the last answer is read, only if it is the same
candidate's: its code can kill this process, and the unpersisted rollout lost must be its own, never its
rival arm's. One rollout at a time per child, records as at concurrency 1; an answer whose item never runs
stays owed. Only where one rollout thrown away matters to nobody: an adapter declaring ``thread_safe = True``,
sync, and no sequential gate, spend ceiling, test split, ``-x``/``--maxfail``/``--stepwise``/``--pdb``.
``-p no:capevolve-ahead`` turns it off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..._engine.runner import declared_thread_safe
from ..._items.nodes import EvalContext, RolloutItem
from ..._policy.budget.spend import Ceilings
from ..._policy.stop.stop_condition import parse as parse_stop_condition
from ..._project.splits import TEST_SPLIT
from .lean_protocol import MarkedItems

PLUGIN_NAME = "capevolve-ahead"


class SendAhead:
    """Tells the running item which item comes next."""

    def __init__(self, context: EvalContext) -> None:
        self.context = context
        self._marked = MarkedItems()  # an item with a mark is never sent ahead, only run in its turn

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        following = nextitem if type(nextitem) is RolloutItem and not self._marked(nextitem) else None
        self.context.next_item = following
        try:
            return (yield)
        finally:
            self.context.next_item = None


def wanted(config: pytest.Config, context: EvalContext, width: int) -> bool:
    option = config.option
    plan = context.plan
    # the spec's ceilings, and those its stop_condition states ("at most 20 rollouts")
    ceilings = Ceilings.from_spec(context.spec, parse_stop_condition(context.spec.stop_condition))
    return (
        width == 1
        and not context.runner.is_async
        # declared, not taken for granted: at concurrency 1 nothing used to overlap
        and declared_thread_safe(context.runner.adapter)
        and getattr(context.runner.adapter, "thread_safe", None) is True
        and plan.sequential is None
        and plan.budget is None
        and ceilings.max_usd is None
        and ceilings.max_metric_calls is None
        and plan.split != TEST_SPLIT
        and not getattr(option, "maxfail", 0)
        # --sw-skip / --sw-reset imply --stepwise in pytest's own pytest_configure, after ours
        and not getattr(option, "stepwise", False)
        and not getattr(option, "stepwise_skip", False)
        and not getattr(option, "stepwise_reset", False)
        and not getattr(option, "usepdb", False)
    )


def register(config: pytest.Config, context: EvalContext, width: int) -> None:
    if wanted(config, context, width):
        config.pluginmanager.register(SendAhead(context), PLUGIN_NAME)
