"""Confined or not, said the same way everywhere: the labels a verdict, a decision, a page carry.

Two parties are labelled apart. **Candidate code**: what each sandbox child reported before any
candidate byte ran, gathered per session, else what this machine gives a child; a verdict is
confined only if every earlier session of the run was too, since it may rest on their rollouts.
**The optimizer**: the label ``capevolve agent``/``hill-climb`` passes to the commands it runs
(:mod:`.._confine.launch`). Process-wide on purpose: one session runs in a process at a time."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from .._confine.landlock import Confinement, expected
from .._confine.launch import CONFINEMENT_ENV, optimizer_label

NOT_BY_AGENT = "not started by capevolve agent"
NOT_SAID = "not said (a session of this run that predates the boundary's label)"
IN_PROCESS = "unconfined (ran in the scoring process, without a sandbox)"
_lock = threading.Lock()
_seen: Counter[str] = Counter()  # label → rollouts run with it, this session
_earlier: list[str] = []  # what the run's earlier sessions said of their candidate code


def begin(earlier: Iterable[str | None] = ()) -> None:
    """A session begins: forget the labels of the last one in this process; ``earlier``: the
    labels the run's earlier sessions logged (None: one that logged none)."""
    with _lock:
        _seen.clear()
        _earlier[:] = sorted({label or NOT_SAID for label in earlier})


def note(label: str | None, count: int = 1) -> None:
    """A rollout whose candidate code ran under ``label`` (None: in the scoring process itself)."""
    with _lock:
        _seen[label or IN_PROCESS] += count


def _summary(counts: dict[str, int]) -> str:
    """One label for many rollouts: the confined one when all were, else the first unconfined
    one, with how many rollouts it covers when the others were confined."""
    if not counts:
        return f"no candidate code ran in this session; this machine: {expected().label}"
    loose = [label for label in counts if not label.startswith("confined")]
    if not loose:
        return min(counts)  # the weakest (lowest ABI) of the confined labels
    total, unconfined = sum(counts.values()), sum(counts[label] for label in loose)
    return loose[0] if unconfined == total else f"{loose[0]} for {unconfined} of {total} rollouts"


def candidate_code() -> str:
    """The label of the candidate code this session ran, and of the run's earlier sessions' when
    one of them was not confined (its rollouts may be part of what a verdict rests on)."""
    with _lock:
        own, earlier = _summary(dict(_seen)), list(_earlier)
    loose = [label for label in earlier if not label.startswith("confined")]
    if not loose or not own.startswith(("confined", "no candidate code ran")):
        return own
    return f"{loose[0]} in an earlier session of this run (this session: {own})"


def optimizer() -> str:
    """The optimizer's label as its starter passed it (:mod:`.._confine.launch`), else as a
    process inside a boundary finds it (``CAPEVOLVE_CONFINEMENT``), else "not started"."""
    passed = optimizer_label()
    if passed is not None:
        return passed
    said = os.environ.get(CONFINEMENT_ENV)
    if not said:
        return NOT_BY_AGENT
    try:
        return Confinement.from_json(json.loads(said)).label
    except (ValueError, TypeError, KeyError):
        return f"unreadable {CONFINEMENT_ENV} ({said[:60]!r})"


def inside_boundary() -> bool:
    """This process runs confined, started by the launcher (``CAPEVOLVE_CONFINEMENT``: an agent, a
    hill-climb's optimizer); never a command the broker runs for them, outside."""
    try:
        return Confinement.from_json(json.loads(os.environ[CONFINEMENT_ENV])).confined
    except (KeyError, ValueError, TypeError):
        return False


def said() -> dict[str, Any]:
    """What a verdict file and a decision event carry under ``confinement``."""
    return {"candidate_code": candidate_code(), "optimizer": optimizer()}


def start_line() -> str | None:
    """The line a session says at start when candidate code will run unconfined, else None."""
    state = expected()
    return None if state.confined else f"capevolve: candidate code runs {state.label}; every verdict says so"
