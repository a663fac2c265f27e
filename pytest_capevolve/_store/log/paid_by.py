"""Every rollout event a decision reads was paid by a session that claimed it, once.

Anyone who can append to the log (the optimizer's shell, candidate code) could add well-chained
``rollout`` events. So before any decision reads them, each must name a ``claimed`` event holding
its key (once the run has claims), and a key in two valid events with no quarantine or vanish
between is refused. A forger who also logs a claim passes: only a kernel boundary stops that."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ...exitcodes import first_few
from ..files import RunDirError
from .event_kinds import CLAIMED, ROLLOUT, ROLLOUT_QUARANTINED, ROLLOUT_VANISHED

Key = tuple[str, str, str, int]  # split, task id, tag, trial
KINDS = (ROLLOUT, CLAIMED, ROLLOUT_QUARANTINED, ROLLOUT_VANISHED)


def claimed_keys(keys: Iterable[Key]) -> dict[str, list[str]]:
    """A claim's keys as a ``claimed`` event holds them: ``split/tag/trial`` → task ids."""
    grouped: dict[str, list[str]] = {}
    for split, task_id, tag, trial in keys:
        grouped.setdefault(f"{split}/{tag}/{int(trial)}", []).append(str(task_id))
    return grouped


def moved_files(event: dict[str, Any]) -> list[str]:
    """The files a ``rollout_quarantined`` or ``rollout_vanished`` event moved or found gone."""
    if event.get("kind") == ROLLOUT_QUARANTINED:
        return [str(event.get("file"))]
    return [str(file) for file in event.get("files") or ()] if event.get("kind") == ROLLOUT_VANISHED else []


class Doubles:
    """The one rule of a key paid twice, fed a log's events in order: two valid rollout events of one
    key (a reward, no infra error) with no quarantine or vanish of its file between. Asked by
    :func:`untrusted` before a decision reads the log, and by ``capevolve verify`` (:func:`paid_twice`),
    so verify shows every double a decision refuses."""

    def __init__(self, file_of: Callable[[Key], str]) -> None:
        self.file_of = file_of  # a rollout's file relative to the run dir (``RunDir.rollout_file``)
        self.valid_since: dict[Key, int] = {}
        self.moved: dict[str, int] = {}  # file -> seq of its last quarantine or vanish
        self.doubled: dict[Key, list[int]] = {}

    def rollout(self, key: Key, event: dict[str, Any]) -> None:
        if event.get("infra_error") is not None or event.get("reward") is None:
            return
        seq = event.get("seq", 0)
        earlier = self.valid_since.get(key)
        if earlier is not None and (not self.moved or self.moved.get(self.file_of(key), -1) < earlier):
            self.doubled.setdefault(key, [earlier]).append(seq)
        self.valid_since[key] = seq

    def other(self, event: dict[str, Any]) -> None:  # (not called per rollout: 60,000 of them in a verify)
        for file in moved_files(event):
            self.moved[file] = int(event.get("seq", 0))

    def lines(self) -> list[str]:
        return [
            f"{key[0]} {key[1]} {key[2]} t{key[3]}: paid {len(seqs)} times (rollout events seq "
            f"{', '.join(map(str, seqs))}) with no quarantine or vanish of its file between"
            for key, seqs in self.doubled.items()
        ]


def _key(event: dict[str, Any]) -> Key:
    """A rollout event's key as the outcome ledger reads it (``rollout_key``): trial ``"0"`` or ``0.0``
    and task id ``1`` are the same rollout there, so they are the same key to the rule of a key paid twice."""
    return str(event["split"]), str(event["task_id"]), str(event["tag"]), int(event["trial"])


def paid_twice(events: Iterable[dict[str, Any]], file_of: Callable[[Key], str]) -> list[str]:
    """One line per key paid twice (:class:`Doubles`), from a log's events in order."""
    doubles = Doubles(file_of)
    for event in events:
        if event.get("kind") != ROLLOUT:
            doubles.other(event)
            continue
        try:
            doubles.rollout(_key(event), event)
        except (KeyError, TypeError, ValueError):
            continue  # no key: :func:`untrusted` names it
    return doubles.lines()


def untrusted(events: Iterable[dict[str, Any]], file_of: Callable[[Key], str]) -> list[str]:
    """One line per rollout event no claim paid, and per key paid twice (``events``: of :data:`KINDS`)."""
    claims: dict[str, dict[tuple[str, str, int], set[str]]] = {}  # claim -> (split, tag, trial) -> ids
    doubles = Doubles(file_of)
    paid = doubles.rollout  # (bound once: called per rollout, 60,000 times before a decision)
    problems: list[str] = []
    for event in events:
        kind = event.get("kind")
        if kind == ROLLOUT:
            try:
                key = split, task_id, tag, trial = _key(event)
                if claims:
                    held = claims.get(event.get("claim"))  # type: ignore[arg-type]
                    ids = None if held is None else held.get((split, tag, trial))
                    if ids is None or task_id not in ids:
                        problems.append(
                            f"rollout event seq {event.get('seq', 0)} ({split} {task_id} {tag} t{trial}): no "
                            "session's claim holds it (written outside a session)"
                        )
                paid(key, event)
            except (KeyError, TypeError, ValueError):
                problems.append(f"rollout event seq {event.get('seq')}: no key (written outside a session)")
        elif kind == CLAIMED:
            held = claims.setdefault(str(event.get("claim")), {})
            try:
                for group, ids in (event.get("keys") or {}).items():
                    split, _, rest = str(group).partition("/")
                    tag, _, number = rest.rpartition("/")
                    held.setdefault((split, tag, int(number)), set()).update(map(str, ids or []))
            except (AttributeError, TypeError, ValueError):
                problems.append(
                    f"claimed event seq {event.get('seq')}: keys unreadable (written outside a session)"
                )
        else:
            doubles.other(event)
    return problems + doubles.lines()


def refuse_untrusted(events: Iterable[dict[str, Any]], run_id: str, file_of: Callable[[Key], str]) -> None:
    problems = untrusted(events, file_of)
    if problems:
        shown = first_few(problems)
        raise UntrustedRecord(
            f"run {run_id}'s log holds rollouts no session paid as recorded: {shown}. Nothing is "
            "decided on it: run `capevolve verify` to see every one, then restore the log from before "
            "them, or start a new run (--capevolve-new-run)"
        )


class UntrustedRecord(RunDirError):
    """Rollout events a decision or seal would read that no claim paid once."""
