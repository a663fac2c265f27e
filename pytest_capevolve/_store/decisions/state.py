"""``state.json``: the run's counters and spend, and how they are rebuilt from the event log.

A cache of the log: missing or unreadable, replayed from it — never reset, which would bring back
the seed as best and the spend to 0. ``spent_through`` marks the point its ``spent`` is current to
and reading adds the rollouts after it, so the spend is exact while the file is rewritten rarely."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

import yaml

from ..._project.candidate import SEED_TAG
from ..files import RunDirError, atomic_write_json, read_json
from ..log.event_kinds import BEST_CHANGED, DECISION, OUTCOMES_CHECKED, ROLLOUT, STATE_REBUILT
from ..log.events import SPEND_FLUSH_EVERY as SPEND_FLUSH_EVERY  # where it has always been read
from ..log.events import EventLog
from .state_tally import OPTIMIZER_SPEND, BestRule, StateTally, best_refusal


class RunState:
    """``state.json`` (``run.state``), a view of ``log``."""

    def __init__(self, state_path: Path, spec_lock_path: Path, log: EventLog, notices: list[str]) -> None:
        self.state_path = state_path
        self.spec_lock_path = spec_lock_path
        self.log = log
        self.lock = log.lock
        self.events_path = log.events_path
        self.notices = notices
        self._spend_cache: tuple[tuple[Any, ...], int, int, int, float] | None = None
        self._tally: StateTally | None = None  # the log folded so far (:meth:`_caught_up_tally`)

    def read_state(self) -> dict[str, Any]:
        """``state.json``; missing or unreadable, rebuilt from the log (the damaged file moved aside)."""
        try:
            state = read_json(self.state_path)
            if isinstance(state, dict) and isinstance(state.get("spent"), dict):
                self._check_against_log(state)
                return self._with_recent_spend(dict(state))
            problem = "not a state object"
        except FileNotFoundError:
            problem = "missing"
        except (ValueError, UnicodeDecodeError) as exc:
            problem = f"unreadable ({exc})"
        if not self.events_path.is_file():
            if problem == "missing":
                return _fresh_state()
            raise RunDirError(
                f"{self.state_path}: {problem}, and there is no events.jsonl to rebuild it from"
            )
        with self.lock():
            if self.state_path.is_file() and problem == "missing":  # another process rebuilt it
                return self._with_recent_spend(dict(read_json(self.state_path)))
            state = self._replayed(problem, with_spent=True)
        self.notices.append(f"{self.state_path} was {problem}: rebuilt from {self.events_path.name}")
        return state

    def replay_state(self, events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """What ``state.json`` should hold, from the log alone (``events``: as the caller read it)."""
        state = _fresh_state()
        if self.spec_lock_path.is_file():
            lock = yaml.safe_load(self.spec_lock_path.read_text(encoding="utf-8")) or {}
            state["budget"] = {key: lock.get(key) for key in BUDGET_KEYS}
        events = self.log.events() if events is None else events
        tally = StateTally()
        tally.fold_all(events)
        logged = tally.at(int(events[-1].get("seq", 0)) if events else 0)
        assert logged is not None  # a tally folded from the start answers for every point
        spent = logged.pop("spent")
        if DECISION not in map(dict.get, events, repeat("kind")):  # (in C: 60,000 events)
            for what in OPTIMIZER_SPEND:  # only decisions carry the optimizer's spend
                del spent[what]
        state.update(logged, spent=spent)
        return state

    def _check_against_log(self, state: dict[str, Any]) -> None:
        """Refuse ``state`` unless every number a decision reads is what the log adds up to at
        ``spent_through``: a hand edit (``spent`` reset to 0) is never used."""
        tally = self._caught_up_tally()
        if tally is None:  # a line that is not an event: the log's own readers refuse it
            return
        if tally.best_rule.unjustified:
            raise RunDirError(best_refusal(self.events_path.name, tally.best_rule.unjustified))
        mark = state.get("spent_through")
        at = tally.seq
        if isinstance(mark, dict) and isinstance(mark.get("seq"), int) and not isinstance(mark["seq"], bool):
            at = min(int(mark["seq"]), tally.seq)
        logged = tally.at(at)
        if logged is None:  # a state current to a point before the checkpoint the fold began at
            tally = self._caught_up_tally(whole=True)
            if tally is None:
                return
            logged = tally.at(at)
            assert logged is not None
        problems = _disagreements(state, logged, also=OPTIMIZER_SPEND)
        if problems:
            raise RunDirError(
                f"{self.state_path}: {problems[0]} at event {at}; state.json was edited. "
                "`capevolve verify --repair` rebuilds it from the log"
            )

    def _caught_up_tally(self, *, whole: bool = False) -> StateTally | None:
        """The log's counters folded to its end, from the last checkpoint (``whole``: the start)."""
        tally = self._tally
        if tally is None or (whole and tally.floor):
            tally = (None if whole else self._checkpointed_tally()) or StateTally()
        got = self.log.events_after(tally.offset, tally.seq, tally.fold)
        if got is None and tally.seq:
            tally = StateTally()
            got = self.log.events_after(0, 0, tally.fold)
        if got is None:
            self._tally = None
            return None
        _, tally.offset, tally.seq = got
        self._tally = tally
        return tally

    def _checkpointed_tally(self) -> StateTally | None:
        """The tally the newest checkpoint logged, if the chain holds it where it says."""
        for event in reversed(self.log.of_kinds(OUTCOMES_CHECKED)):
            if "state" not in event:
                continue  # logged before checkpoints carried the tally: an older one may
            if not self.log.linked(event):
                return None
            at = int(event["offset"]), int(event["upto"])
            return StateTally.resumed(event["state"], *at)
        return None

    def checkpoint_fields(self, offset: int, seq: int) -> dict[str, Any]:
        """As a session leaves: the tally for the outcome ledger's checkpoint, if the fold is there."""
        tally = self._caught_up_tally()
        if tally is None or (tally.offset, tally.seq) != (offset, seq):
            return {}
        return {"state": tally.held()}

    def best(self) -> str:
        """The best's tag as the log has it; a disagreeing ``best_id`` in ``state.json`` is refused."""
        with self.lock():  # a booking updates the state and logs the change under this lock
            stated = str(self.read_state().get("best_id", SEED_TAG))
            logged = self.logged_best()
        if stated != logged:
            raise RunDirError(
                f"{self.state_path}: best_id {stated!r} is not the event log's best ({logged!r}); "
                "state.json was edited. `capevolve verify --repair` rebuilds it from the log"
            )
        return logged

    def logged_best(self) -> str:
        best = SEED_TAG
        rule = BestRule()
        for event in self.log.of_kinds(DECISION, BEST_CHANGED):
            if not rule.see(event):
                continue
            if event.get("kind") == BEST_CHANGED:
                best = str(event["best_id"])
            elif event.get("decision") == "accept":
                best = str(event["tag"])
        if rule.unjustified:
            raise RunDirError(best_refusal(self.events_path.name, rule.unjustified))
        return best

    def update_state(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        with self.lock():
            state = self.read_state()
            change(state)
            self._write_state(state)
            return state

    # -- a view of the log (:class:`..log.log_views.LogView`) ---------------------------------------

    @property
    def name(self) -> str:
        return self.state_path.name

    def catch_up(self) -> None:
        """Write the spend logged since into ``state.json`` (:meth:`read_state` already counts it)."""
        self.update_state(lambda state: None)

    def check(self, events: list[dict[str, Any]], *, repair: bool) -> list[str]:
        """``state.json`` against what ``events`` add up to (best, counters, spend)."""
        expected = self.replay_state(events)
        name = self.name
        try:
            state = read_json(self.state_path)
            assert isinstance(state, dict)
        except FileNotFoundError:
            return [f"{name}: missing; the events add up to best {expected['best_id']!r}"]
        except (ValueError, AssertionError, UnicodeDecodeError):
            return [f"{name}: unreadable"]
        if isinstance(state.get("spent"), dict):  # the rollouts logged since it was written count
            state = self._with_recent_spend(dict(state))
        return [f"{name}: {problem}" for problem in _disagreements(state, expected)]

    def rebuild(self, problems: Sequence[str]) -> str:
        self._replayed("; ".join(problems), with_spent=False)
        return f"{self.name}: rebuilt from the events ({len(problems)} disagreement(s))"

    def _replayed(self, problem: str, *, with_spent: bool) -> dict[str, Any]:
        """Under the lock: the old file moved aside, ``state.json`` replayed from the log, and logged."""
        state = self.replay_state()
        if self.state_path.exists():
            os.replace(
                self.state_path,
                self.state_path.with_name(f"{self.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"),
            )
        self._write_state(state)
        spent = {"spent": state["spent"]} if with_spent else {}
        self.log.append_event(STATE_REBUILT, problem=problem, best_id=state["best_id"], **spent)
        return state

    def _write_state(self, state: dict[str, Any]) -> None:
        size, _, seq = self.log.tail()
        state["spent_through"] = {"offset": size, "seq": seq}
        atomic_write_json(self.state_path, state)

    def _with_recent_spend(self, state: dict[str, Any]) -> dict[str, Any]:
        """``state`` with the rollouts logged after its ``spent_through`` added."""
        mark = state.get("spent_through")
        if not isinstance(mark, dict):
            try:
                with self.lock():
                    current = read_json(self.state_path)
                    if isinstance(current, dict) and isinstance(current.get("spent_through"), dict):
                        return self._with_recent_spend(current)  # marked by another process meanwhile
                    self._write_state(state)
            except OSError:  # a read-only copy of a run (a CI artifact): read it as it is
                pass
            return state
        spent = state["spent"]
        base = (mark.get("offset"), mark.get("seq"), spent.get("metric_calls"), spent.get("usd"))
        cache = self._spend_cache
        if cache is not None and cache[0] == base:
            _, offset, seq, calls, usd = cache
        else:
            offset, seq, calls = (int(value or 0) for value in base[:3])
            usd = float(base[3] or 0)
        folded = [calls, usd]

        def fold(event: dict[str, Any]) -> None:  # rollouts summed as they are read, not held
            if event.get("kind") == ROLLOUT:
                folded[0] += 1
                folded[1] += float(event.get("cost_usd") or 0.0)

        tail = self.log.events_after(offset, seq, fold)
        if tail is None:
            replayed = self.replay_state()["spent"]
            calls, usd = int(replayed["metric_calls"]), float(replayed["usd"])
            self.notices.append(
                f"{self.events_path.name} does not continue where {self.state_path.name} left it: "
                "the spend was recounted from the whole log"
            )
            offset, _, seq = self.log.tail()
        else:
            _, offset, seq = tail
            calls, usd = int(folded[0]), float(folded[1])
        self._spend_cache = (base, offset, seq, calls, usd)
        state["spent"] = {**spent, "metric_calls": calls, "usd": usd}
        return state


def _disagreements(state: dict[str, Any], logged: dict[str, Any], *, also: Sequence[str] = ()) -> list[str]:
    """Each number of ``state`` that is not ``logged``'s (and ``also``'s optimizer spend), in words."""
    spent, want = state.get("spent") or {}, logged["spent"]
    exact = [
        ("best_id", state.get("best_id"), logged["best_id"]),
        ("iterations", state.get("iterations"), logged["iterations"]),
        ("stall", state.get("stall"), logged["stall"]),
        ("spent.metric_calls", spent.get("metric_calls"), want["metric_calls"]),
    ]
    # sums of costs: equal up to rounding (an optimizer's spend is absent until its first decision)
    close = [("spent.usd", spent.get("usd"), want["usd"])]
    close += [(f"spent.{what}", spent.get(what, 0), want[what]) for what in also]
    wrong = [(what, value, expected) for what, value, expected in exact if value != expected]
    wrong += [(what, value, expected) for what, value, expected in close if not _near(value, expected)]
    return [
        f"{what} is {value!r}, but the event log adds up to {expected!r}" for what, value, expected in wrong
    ]


def _near(value: Any, expected: float) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9)


BUDGET_KEYS = ("max_metric_calls", "max_usd", "max_iterations", "stall", "stop_condition")


def _fresh_state() -> dict[str, Any]:
    return {
        "best_id": SEED_TAG,
        "iterations": 0,
        "stall": 0,
        "spent": {"metric_calls": 0, "usd": 0.0},
        "budget": {},
    }
