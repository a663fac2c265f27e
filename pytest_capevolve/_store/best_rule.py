"""When the log may move the best: the one rule, read by the state fold and ``verify``.

``RunDir(run).log.append_event(BEST_CHANGED, best_id="noop3")`` and a deleted
``state.json`` made a rejected tag the best: the state was rebuilt from the log, and ``measure``
scored noop3 on test. A ``best_changed`` event is only ever the echo of a decision, so it is
honoured only when the log already holds what explains it: a booked ``accept`` of that tag (a
gate accept, or a forced commit, which every view labels as forced), or — for a run made by
``capevolve import-cap-evolve`` — the import's own ``cap_evolve_imported`` event naming it. Any
other ``best_changed`` moves nothing; the state's readers refuse the run in one line naming the
event and ``capevolve verify`` reports it.
"""

from __future__ import annotations

from typing import Any

from .._decide.basis import Basis
from .event_kinds import BEST_CHANGED, CAP_EVOLVE_IMPORTED, DECISION


class BestRule:
    """Folded event by event, in log order (:meth:`see`)."""

    def __init__(self) -> None:
        self.accepted: set[str] = set()
        self.imported: set[str] = set()
        self.unjustified: list[str] = []  # one line per best_changed nothing explains
        self.best = "seed"  # as the honoured events leave it

    def see(self, event: dict[str, Any]) -> bool:
        """False for a ``best_changed`` the log so far does not explain (then recorded in
        :attr:`unjustified`); True for every other event."""
        kind = event.get("kind")
        if kind == DECISION and event.get("decision") == "accept":
            self.accepted.add(str(event.get("tag")))
            self.best = str(event.get("tag"))
        elif kind == CAP_EVOLVE_IMPORTED and event.get("best_id") is not None:
            self.imported.add(str(event["best_id"]))
        elif kind == BEST_CHANGED:
            best = str(event.get("best_id"))
            if best == self.best:  # moves nothing (a log that repeats the best it has)
                return True
            if best in self.accepted or (
                event.get("basis") == Basis.CAP_EVOLVE_IMPORT and best in self.imported
            ):
                self.best = best
                return True
            self.unjustified.append(
                f"event {event.get('seq')}: best_changed to {best!r}, but the log books no accept "
                f"of {best!r}; a best is moved only by a decision (capevolve commit)"
            )
            return False
        return True


def refusal(path: str, unjustified: list[str]) -> str:
    """The one line a reader of the state prints for a log that moves the best unexplained."""
    more = f" (and {len(unjustified) - 1} more)" if len(unjustified) > 1 else ""
    return f"{path}: {unjustified[0]}{more}; the log was written outside a decision, so this run is refused"
