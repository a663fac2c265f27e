"""Session kinds: one class per kind of capevolve session, chosen from one table.

Controller only. The first kind in :data:`KINDS` whose ``asked`` says yes (evaluate, last, always does),
unless ``pytest_capevolve_make_session`` replaces it; each kind imports its machinery lazily in ``start``."""

from __future__ import annotations

import pytest

from .base import SessionKind, Started
from .cheaper import GrowKind, ScreenKind
from .evaluate import EvaluateKind, FinalizeKind
from .sequential import SequentialGateKind

__all__ = ["KINDS", "SessionKind", "Started", "choose_kind"]

KINDS: dict[str, SessionKind] = {
    kind.name: kind
    for kind in (FinalizeKind(), ScreenKind(), GrowKind(), SequentialGateKind(), EvaluateKind())
}


def choose_kind(config: pytest.Config, split: str) -> SessionKind:
    default = next(kind for kind in KINDS.values() if kind.asked(config, split))
    chosen = config.hook.pytest_capevolve_make_session(config=config, default=default, kinds=dict(KINDS))
    return default if chosen is None else chosen
