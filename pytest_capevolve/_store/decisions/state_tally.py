"""What the event log says ``state.json`` should hold, at any point of the log.

``state.json`` is checked at the point it says it is current to, so the log is folded once per
process, keeping the counters after every change. Every decision is an iteration, a reject a stall,
an accept the new best and stall 0; an unannounced ``best_changed`` is an iteration of its own.
An accept forced against the gate or re-gated after a harness change keeps a label in its
``decision`` event (:func:`label_of`), so neither passes for a plain gate accept in any view."""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Iterable, Mapping
from typing import Any

from ..._project.candidate import SEED_TAG
from ..log.event_kinds import BEST_CHANGED, DECISION, ROLLOUT

OPTIMIZER_SPEND = ("optimizer_usd", "optimizer_tokens", "optimizer_seconds")
FORCED_LABEL = "forced: accepted against the gate"
SHORT = {FORCED_LABEL: "forced"}  # the short forms the tables show beside a tag


def label_of(event: Mapping[str, object]) -> str | None:
    if event.get("kind") not in (None, DECISION) or event.get("decision") != "accept":
        return None
    if event.get("against_gate"):
        return FORCED_LABEL
    label = event.get("label")
    return label if isinstance(label, str) and label else None


def labelled_accepts(events: Iterable[dict[str, Any]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for event in events:
        if event.get("kind") == DECISION and (label := label_of(event)) is not None:
            found[str(event.get("tag"))] = label
    return found


def short(label: str) -> str:
    return SHORT.get(label) or label.split(" — ")[0]


class BestRule:
    """When the log may move the best: the one rule, read by the state fold and ``verify``.

    A forged ``best_changed`` once made a rejected tag the best, so it is honoured only when the log
    already explains it (a booked accept of that tag); any other moves
    nothing and the run is refused naming it."""

    def __init__(self) -> None:
        self.accepted: set[str] = set()
        self.unjustified: list[str] = []  # one line per best_changed nothing explains
        self.best = "seed"  # as the honoured events leave it

    def see(self, event: dict[str, Any]) -> bool:
        """False for a ``best_changed`` the log so far does not explain (kept in :attr:`unjustified`)."""
        kind = event.get("kind")
        if kind == DECISION and event.get("decision") == "accept":
            self.accepted.add(str(event.get("tag")))
            self.best = str(event.get("tag"))
        elif kind == BEST_CHANGED:
            best = str(event.get("best_id"))
            if best == self.best:  # moves nothing (a log that repeats the best it has)
                return True
            if best in self.accepted:
                self.best = best
                return True
            self.unjustified.append(
                f"event {event.get('seq')}: best_changed to {best!r}, but the log books no accept "
                f"of {best!r}; a best is moved only by a decision (capevolve commit)"
            )
            return False
        return True


def best_refusal(path: str, unjustified: list[str]) -> str:
    more = f" (and {len(unjustified) - 1} more)" if len(unjustified) > 1 else ""
    return f"{path}: {unjustified[0]}{more}; the log was written outside a decision, so this run is refused"


class StateTally:
    """The log's counters, folded event by event."""

    def __init__(self) -> None:
        self.offset = 0  # where in the log the fold has reached: its byte offset and seq
        self.seq = 0
        self._rollout_seqs = array("q")
        self._spend = array("d")  # the running sum of rollout costs, one per rollout
        self._change_seqs = array("q", [0])
        self._counters: list[dict[str, Any]] = [_start()]
        self.floor = 0  # the first seq this tally answers for (a checkpoint's, when resumed)
        self._base = (0, 0.0)  # rollouts and their cost up to ``floor``
        self.best_rule = BestRule()  # a best_changed no accept explains moves nothing

    @classmethod
    def resumed(cls, held: Any, offset: int, seq: int) -> StateTally | None:
        """A tally going on from ``held`` (logged at ``offset``, ``seq``); None if it is not a tally."""
        if not isinstance(held, dict) or not isinstance(held.get("best_id"), str):
            return None
        announced = held.get("announced")
        counts = [held.get(what) for what in ("iterations", "stall", "metric_calls")]
        sums: list[Any] = [held.get(what) for what in ("usd", *OPTIMIZER_SPEND)]
        if not isinstance(announced, str | None):
            return None
        if not all(type(v) is int and v >= 0 for v in counts):  # counts: ints, sums: finite numbers
            return None
        if not all(type(v) in (int, float) and math.isfinite(v) for v in sums):
            return None
        tally = cls()
        tally.offset, tally.seq, tally.floor = offset, seq, seq
        tally._base = (int(held["metric_calls"]), float(held["usd"]))
        kept = ("best_id", "iterations", "stall", "announced", *OPTIMIZER_SPEND)
        counters = {what: held[what] for what in kept}
        tally._change_seqs, tally._counters = array("q", [seq]), [counters]
        # what explains a later best_changed goes on from the checkpoint too (a fresh rule would
        # take the best for "seed", and honour a forged move back to it)
        rule = tally.best_rule
        rule.best = str(held["best_id"])
        rule.accepted = {str(t) for t in held.get("accepted") or () if isinstance(t, str)}
        return tally

    def held(self) -> dict[str, Any]:
        calls = len(self._rollout_seqs)
        return {
            **self._counters[-1],
            "metric_calls": self._base[0] + calls,
            "usd": self._spend[-1] if calls else self._base[1],
            "accepted": sorted(self.best_rule.accepted),
        }

    def fold_all(self, events: list[dict[str, Any]]) -> None:
        """:meth:`fold` on each of ``events``, rollouts folded in line (no call per rollout)."""
        seqs, spend, fold = self._rollout_seqs, self._spend, self.fold
        for event in events:
            if event.get("kind") != ROLLOUT:
                fold(event)
                continue
            before = spend[-1] if spend else self._base[1]
            seqs.append(int(event.get("seq", 0)))
            spend.append(before + float(event.get("cost_usd") or 0.0))

    def fold(self, event: dict[str, Any]) -> None:
        kind = event.get("kind")
        if kind == ROLLOUT:
            self.fold_all([event])
            return None
        seq = int(event.get("seq", 0))
        if kind not in (DECISION, BEST_CHANGED):
            return None
        if not self.best_rule.see(event):
            return None
        counters = dict(self._counters[-1])
        if kind == DECISION:
            counters["iterations"] += 1
            if event.get("decision") == "reject":
                counters["stall"] += 1
            elif event.get("decision") == "accept":
                counters["stall"], counters["best_id"] = 0, str(event["tag"])
            for what in OPTIMIZER_SPEND:
                counters[what] = counters[what] + (event.get(what) or 0)
            counters["announced"] = str(event["tag"]) if event.get("decision") == "accept" else None
        else:  # best_changed
            best = str(event["best_id"])
            if counters["announced"] != best:  # not the accept just booked: a change of its own
                counters["iterations"] += 1
                counters["stall"] = 0
            counters["best_id"], counters["announced"] = best, None
        self._change_seqs.append(seq)
        self._counters.append(counters)
        return None

    def at(self, seq: int) -> dict[str, Any] | None:
        """What ``state.json`` current to ``seq`` holds; None before a resumed tally's :attr:`floor`."""
        if seq < self.floor:
            return None
        counters = self._counters[bisect.bisect_right(self._change_seqs, seq) - 1]
        calls = bisect.bisect_right(self._rollout_seqs, seq)
        usd = self._spend[calls - 1] if calls else self._base[1]
        spent: dict[str, Any] = {"metric_calls": self._base[0] + calls, "usd": usd}
        spent.update({what: counters[what] for what in OPTIMIZER_SPEND})
        return {
            "best_id": counters["best_id"],
            "iterations": counters["iterations"],
            "stall": counters["stall"],
            "spent": spent,
        }


def _start() -> dict[str, Any]:
    return {
        "best_id": SEED_TAG,
        "iterations": 0,
        "stall": 0,
        "announced": None,
        **dict.fromkeys(OPTIMIZER_SPEND, 0),
    }
