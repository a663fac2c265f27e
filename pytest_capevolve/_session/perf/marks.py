"""Which rollout items carry a mark, their own or a collector's above them: pytest's setup may
skip such an item (``skip``, ``skipif``, ``xfail(run=False)``), so the session's shortcuts —
the lean protocol, sending a rollout ahead — leave it to pytest's full protocol, in its turn.
One answer per collector, kept: a session has thousands of items under a few collectors."""

from __future__ import annotations

import pytest


class MarkedItems:
    def __init__(self) -> None:
        self._parents: dict[int, bool] = {}  # id(parent) -> a collector above carries a mark

    def __call__(self, item: pytest.Item) -> bool:
        if item.own_markers:
            return True
        parent = item.parent
        marked = self._parents.get(id(parent))
        if marked is None:
            marked = self._parents[id(parent)] = any(True for _ in parent.iter_markers())  # type: ignore[union-attr]
        return marked
