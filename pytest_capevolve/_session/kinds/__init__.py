"""Session kinds: one class per kind of capevolve session, chosen from one table.

Controller only, from :func:`..wiring.configure`. A kind is chosen from the options — the first
in :data:`KINDS` whose ``asked`` says yes (evaluate, last, always does) — and a project may
replace it through ``pytest_capevolve_make_session`` (:mod:`pytest_capevolve.hookspec`), as
pytest-xdist lets a plugin replace its scheduler. The kind's ``start`` plans the session under
its locks and builds the role that concludes it; the controller registers what it returns
(:class:`Started`) the same way for every kind. Adding a kind is one module here and one line
in :data:`KINDS`.

Each kind's module imports what it plans and judges with lazily, inside ``start``: a session
imports the machinery of its own kind only.
"""

from __future__ import annotations

import pytest

from .base import SessionKind, Started
from .evaluate import EvaluateKind
from .finalize import FinalizeKind
from .grow import GrowKind
from .screen import ScreenKind
from .sequential import SequentialGateKind

__all__ = ["KINDS", "SessionKind", "Started", "choose_kind"]

KINDS: dict[str, SessionKind] = {
    kind.name: kind
    for kind in (FinalizeKind(), ScreenKind(), GrowKind(), SequentialGateKind(), EvaluateKind())
}


def choose_kind(config: pytest.Config, split: str) -> SessionKind:
    """The kind the options ask for (the first in :data:`KINDS` that says so), or the one a
    ``pytest_capevolve_make_session`` implementation returns instead."""
    default = next(kind for kind in KINDS.values() if kind.asked(config, split))
    chosen = config.hook.pytest_capevolve_make_session(config=config, default=default, kinds=dict(KINDS))
    return default if chosen is None else chosen
