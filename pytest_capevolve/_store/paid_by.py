"""Every rollout event a decision reads was paid by a session that claimed it, once.

The log takes events from anyone who can append to it: the optimizer's shell, or candidate code
from its sandbox child, appended correctly chained ``rollout`` events through the package's own
``RunDir`` API, and the gate used them (val reads the first outcome of a key, the seal the last).
A key logged twice was found by ``capevolve verify`` only, after the decision had used it. So,
in one pass over the rollout events, before any decision or seal reads them:

- **tied to a claim**: a session that pays rollouts logs its claim (``claimed``: its claim id
  and the keys it owes, :meth:`.claims.Claims.take`), and each ``rollout`` event it writes
  names that claim (``claim``). A rollout event logged after the run's first claim that names
  no claim, or a claim that does not hold its key, was written outside a session: not trusted.
  (Events before the run's first claim are a run older than claims: read as they were.)
- **one valid event per key**: a key in two valid rollout events with no quarantine or vanish
  of its file between them (after either, paying it again is expected) is refused — the rule
  ``capevolve verify`` applies, now applied before the decision, not after.

Unconfined, a forger who also logs a claim through the same API passes this check: the event
log is written by one user, and only a process boundary the kernel enforces keeps candidate code
and the optimizer from it (the threat model says so). This check refuses the forgeries that do
not go that far, and names each.

Controller only; reads the log, writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._project.candidate import check_tag, escape_id
from ..exitcodes import first_few
from .event_kinds import CLAIMED, ROLLOUT, ROLLOUT_QUARANTINED, ROLLOUT_VANISHED
from .files import RunDirError

Key = tuple[str, str, str, int]  # split, task id, tag, trial
KINDS = (ROLLOUT, CLAIMED, ROLLOUT_QUARANTINED, ROLLOUT_VANISHED)


def claimed_keys(keys: Iterable[Key]) -> dict[str, list[str]]:
    """A claim's keys as a ``claimed`` event holds them: ``split/tag/trial`` → task ids (one
    short line per session, not a list of 60,000 quadruples)."""
    grouped: dict[str, list[str]] = {}
    for split, task_id, tag, trial in keys:
        grouped.setdefault(f"{split}/{tag}/{int(trial)}", []).append(str(task_id))
    return grouped


def _file_of(key: Key) -> str:
    split, task_id, tag, trial = key
    return f"rollouts/{split}/{escape_id(task_id)}__{check_tag(tag)}__t{int(trial)}.json"


def untrusted(events: Iterable[dict[str, Any]]) -> list[str]:
    """One line per rollout event no session's claim paid, and per key paid twice; ``events``:
    the log's events of :data:`KINDS`, in log order. One pass, a few dict lookups an event (the
    log holds 60,000 rollout lines at the scale we measure)."""
    claims: dict[str, dict[tuple[str, str, int], set[str]]] = {}  # claim -> (split, tag, trial) -> ids
    valid_since: dict[Key, int] = {}
    moved: dict[str, int] = {}  # file -> seq of its last quarantine or vanish
    problems: list[str] = []
    doubled: dict[Key, list[int]] = {}
    for event in events:
        kind = event.get("kind")
        if kind == ROLLOUT:
            try:
                split, task_id, tag, trial = event["split"], event["task_id"], event["tag"], event["trial"]
                key = (split, task_id, tag, trial)
                seq = event.get("seq", 0)
                if claims:
                    held = claims.get(event.get("claim"))  # type: ignore[arg-type]
                    ids = None if held is None else held.get((split, tag, trial))
                    if ids is None or task_id not in ids:
                        problems.append(
                            f"rollout event seq {seq} ({split} {task_id} {tag} t{trial}): no session's "
                            "claim holds it (written outside a session)"
                        )
            except (KeyError, TypeError):
                problems.append(f"rollout event seq {event.get('seq')}: no key (written outside a session)")
                continue
            if event.get("infra_error") is not None or event.get("reward") is None:
                continue
            earlier = valid_since.get(key)
            if earlier is not None and (not moved or moved.get(_file_of(key), -1) < earlier):
                doubled.setdefault(key, [earlier]).append(seq)
            valid_since[key] = seq
        elif kind == CLAIMED:
            held = claims.setdefault(str(event.get("claim")), {})
            for group, ids in (event.get("keys") or {}).items():
                split, _, rest = str(group).partition("/")
                tag, _, trial = rest.rpartition("/")
                held.setdefault((split, tag, int(trial)), set()).update(map(str, ids or []))
        elif kind in (ROLLOUT_QUARANTINED, ROLLOUT_VANISHED):
            files = [event.get("file")] if kind == ROLLOUT_QUARANTINED else event.get("files") or []
            for file in map(str, files):
                moved[file] = int(event.get("seq", 0))
    for key, seqs in doubled.items():
        problems.append(
            f"{key[0]} {key[1]} {key[2]} t{key[3]}: paid {len(seqs)} times (rollout events seq "
            f"{', '.join(map(str, seqs))}) with no quarantine or vanish of its file between"
        )
    return problems


def refuse_untrusted(events: Iterable[dict[str, Any]], run_id: str) -> None:
    """Raise :class:`UntrustedRecord` naming what :func:`untrusted` found, before a decision."""
    problems = untrusted(events)
    if problems:
        shown = first_few(problems)
        raise UntrustedRecord(
            f"run {run_id}'s log holds rollouts no session paid as recorded: {shown}. Nothing is "
            "decided on it: run `capevolve verify` to see every one, then restore the log from before "
            "them, or start a new run (--capevolve-new-run)"
        )


class UntrustedRecord(RunDirError):
    """Rollout events a decision or seal would read that no session's claim paid once."""
