"""When the log may move the best: the one rule, read by the state fold and ``verify``.

A forged ``best_changed`` once made a rejected tag the best, so it is honoured only when the log
already explains it (a booked accept of that tag, or an import naming it); any other moves nothing
and the run is refused naming it."""

from __future__ import annotations

from typing import Any

from ..._decide.basis import Basis
from ..log.event_kinds import BEST_CHANGED, CAP_EVOLVE_IMPORTED, DECISION


class BestRule:
    def __init__(self) -> None:
        self.accepted: set[str] = set()
        self.imported: set[str] = set()
        self.unjustified: list[str] = []  # one line per best_changed nothing explains
        self.best = "seed"  # as the honoured events leave it

    def see(self, event: dict[str, Any]) -> bool:
        """False for a ``best_changed`` the log so far does not explain (kept in :attr:`unjustified`)."""
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
    more = f" (and {len(unjustified) - 1} more)" if len(unjustified) > 1 else ""
    return f"{path}: {unjustified[0]}{more}; the log was written outside a decision, so this run is refused"
