"""At concurrency 1: the next rollout's request sent ahead, while this process handles the last.

Each rollout is a round trip to its candidate's sandbox child (:mod:`..._engine.sandbox`). At
concurrency 1 the child used to sit idle while this process scored, persisted and reported a
rollout, and this process sat idle while the child ran the next one. With this plugin, as soon
as a rollout's answer has been read (before it is scored), the next item's request goes to the
same child, if the next item is the same candidate's (a single-tag session, or trials of one
tag in a row): the child runs it while this process finishes the last one, and the next item
collects its answer (:meth:`..._items.nodes.RolloutItem.send_ahead`). Only the same
candidate's: a candidate's code can kill this process (it is its parent) while its rollout runs
ahead, and the rollout then lost with it, not yet persisted, must be that candidate's own —
never another arm's, which would let a candidate make the arm it is compared with miss data.

What does not change: the child runs one rollout at a time (a request is only sent to an idle
child); the checks made before a rollout is paid are made before it is sent; the snapshot's
stamp is taken before it is sent and compared after its answer; its deadline and ``seconds``
run from when it was sent; records, reports and persistence are those of concurrency 1. An
answer sent ahead for an item that then asks for something else (it was skipped, or the log
level moved) is read and dropped; one whose item never runs (the session stopped) is lost with
its child when the session ends, and its rollout stays owed.

Registered only for an adapter that declares ``thread_safe = True``: the next ``run_target``
runs while this process scores the last, and a scorer may read state the next rollout changes
(a workspace the agent edits, the tests run on it a moment later). An adapter that never said
so is taken as safe for ``--capevolve-concurrency`` (:func:`..._engine.runner.declared_thread_safe`),
but at concurrency 1 nothing of it ever overlapped: it is not overlapped now. And only where one
more rollout paid and thrown away would matter to nobody: a sync adapter at concurrency 1, no
sequential gate (a decision made from the last rollout would come after the next was paid), no
``max_usd`` / ``max_metric_calls`` ceiling (the spec's or its ``stop_condition``'s), not the
sealed test split, and no ``-x`` / ``--maxfail`` / ``--stepwise`` / ``--pdb`` (a session that
stops at a failure). ``-p no:capevolve-ahead`` turns it off: the same records either way.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..._engine.runner import declared_thread_safe
from ..._items.nodes import EvalContext, RolloutItem
from ..._policy.spend import Ceilings
from ..._policy.stop_condition import parse as parse_stop_condition
from ..._project.splits import TEST_SPLIT
from .marks import MarkedItems

PLUGIN_NAME = "capevolve-ahead"


class SendAhead:
    """Tells the running item which item comes next (see the module docstring)."""

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
    """Whether this session's rollouts may be sent ahead (see the module docstring)."""
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
