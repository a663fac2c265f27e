"""Cross-checking a run dir against its event log: what ``capevolve verify`` adds to the chain.

Every ``rollout`` event records the key, outcome and file sha256, so a file that differs from its
event, a file no event records, a file gone unlogged, or a rollout paid twice is found here.
``repair=True`` rebuilds the views, logs files gone by hand and quarantines tampered files."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from ..._project.spec import Spec
from ..._project.splits import TEST_SPLIT
from ..decisions.state_tally import BestRule
from ..files import read_plain_bytes
from ..log.event_chain import verified_events
from ..log.event_kinds import ROLLOUT, RUN_CREATED, VERDICT
from ..log.log_views import check_views
from ..log.outcome_ledger import outcome
from ..log.paid_by import Key, moved_files, paid_twice
from ..rollouts.index_sync import RolloutScan, Scanned, data_of, error_of, log_vanished, scan_rollouts
from ..rollouts.record import RecordError, RolloutRecord
from ..rundir import RunDir

Logged = dict[Key, dict[str, Any]]  # each key's last rollout event


def audit(
    rundir: RunDir,
    *,
    repair: bool = False,
    events: list[dict[str, Any]] | None = None,
    others: list[dict[str, Any]] | None = None,
) -> list[str]:
    """One line per disagreement between the run's files and its events. ``events``: the log as the
    caller parsed it; ``others``, if given, gets every non-rollout event, in order."""
    if events is None:
        events = verified_events(rundir.events_path)  # parsed once, by the chain's check just before
    if events is None:
        events = rundir.log.events()
    scan = scan_rollouts(rundir.root)
    others = [] if others is None else others  # every event but the rollouts: what the best rule reads
    start = len(others)
    problems = _rollouts(rundir, events, scan.files, others, repair=repair, digests=scan.digests)
    rule = BestRule()  # a best_changed no booked accept explains (forged with append_event)
    for event in others[start:]:
        rule.see(event)
    problems += [f"{rundir.events_path.name}: {line}" for line in rule.unjustified]
    problems += _verdict_files(rundir, others[start:]) + _spec_lock(rundir, others[start:])
    problems += _sealed_summary(rundir, events, repair=repair)
    if repair:  # it may have logged files gone by hand: the views see the log as it is now
        events = rundir.log.events()
    with rundir.rollouts.index_view.reading(scan.files):
        problems += check_views(rundir.log_views, events, rundir.lock, rundir.notices, repair=repair)
    return problems + _unfinished_writes(rundir, scan, repair=repair)


def _sealed_summary(rundir: RunDir, events: list[dict[str, Any]], *, repair: bool) -> list[str]:
    """The sealed summary's rows, while it serves, against the outcomes of every rollout line (it is
    what a resume and a gate with nothing owed read: forged with its chained line, or written again
    through the package's API, it would decide). ``repair`` removes it: the next session reads the
    index and its files, and seals a new one."""
    summary = rundir.rollouts.summary
    served = summary.rows()
    if served is None:
        return []
    truth = rundir.rollouts.ledger.replayed(events)  # the log as verify parsed it: not read again
    said = {(r[0], r[1], r[2], int(r[3])): outcome(r[4], r[6], r[7]) for r in served[1]}
    differ = sorted(key for key in said.keys() | truth.keys() if said.get(key) != truth.get(key))
    if not differ:
        return []
    if repair:
        summary.path.unlink(missing_ok=True)
        rundir.notices.append(f"{summary.path.name}: removed ({len(differ)} row(s) differed from the log)")
        return []
    split, tag, task_id, trial = differ[0]
    return [
        f"{summary.path.name}: {len(differ)} row(s) differ from the log's rollout events (first: {split} "
        f"{task_id} {tag} t{trial}); a resume or gate with nothing owed would read them. `capevolve "
        "verify --repair` removes it (the next session reads the index and the files, and seals another)"
    ]


def _verdict_files(rundir: RunDir, others: list[dict[str, Any]]) -> list[str]:
    """Each verdict file whose bytes are not what its tag's last ``verdict`` event logged (edited),
    or that no event logged (planted): named, never repaired (only its gate could write it again)."""
    logged = {str(e.get("tag")): e for e in others if e.get("kind") == VERDICT}
    problems = []
    for path in sorted(rundir.verdicts.folder.glob("*.json")):
        event = logged.get(path.stem)
        if event is None:
            problems.append(f"{path.name}: a verdict no gate logged (planted); delete it")
        elif "sha256" in event and hashlib.sha256(path.read_bytes()).hexdigest() != event["sha256"]:
            problems.append(
                f"verdicts/{path.name}: not the verdict logged at event seq {event.get('seq')} (edited); "
                "restore it from a backup"
            )
    return problems


def _spec_lock(rundir: RunDir, others: list[dict[str, Any]]) -> list[str]:
    """The frozen keys of ``spec.lock.yaml`` that are not what ``run_created`` logged (edited)."""
    created = next((e for e in others if e.get("kind") == RUN_CREATED), None)
    frozen = (created or {}).get("frozen")
    if not isinstance(frozen, dict) or not rundir.spec_lock_path.is_file():
        return []
    try:
        locked = yaml.safe_load(rundir.spec_lock_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        locked = None
    if not isinstance(locked, dict):
        return [f"{rundir.spec_lock_path.name}: damaged, not the YAML mapping the run froze"]
    canonical = partial(json.dumps, sort_keys=True, ensure_ascii=False)
    edited = [k for k in frozen if canonical(Spec.locked_value(locked, k)) != canonical(frozen[k])]
    return (
        [f"{rundir.spec_lock_path.name}: {', '.join(edited)} not what the run froze (edited); restore it"]
        if edited
        else []
    )


def _unfinished_writes(rundir: RunDir, scan: RolloutScan, *, repair: bool) -> list[str]:
    """Temporary files of interrupted atomic writes; removed by ``repair`` only while no other session
    is live (it may be writing one)."""
    leftovers = sorted(map(Path, scan.leftovers + _temporaries(str(rundir.root), scan.folders)))
    if not leftovers:
        return []
    if repair and not rundir.claims.others():
        for path in leftovers:
            path.unlink(missing_ok=True)
        rundir.notices.append(f"removed {len(leftovers)} unfinished temporary file(s) of interrupted writes")
        return []
    return [
        f"{path.relative_to(rundir.root)}: an unfinished write (an interrupted session; "
        "`capevolve verify --repair` removes it when no session is running)"
        for path in leftovers
    ]


def _temporaries(top: str, listed: frozenset[str]) -> list[str]:
    """Every ``.*.tmp`` under ``top`` outside ``listed`` (links to folders not followed)."""
    found = []
    for folder, subfolders, names in os.walk(top):
        subfolders[:] = [name for name in subfolders if os.path.join(folder, name) not in listed]
        found += [os.path.join(folder, n) for n in names if n.startswith(".") and n.endswith(".tmp")]
    return found


def _rollouts(
    rundir: RunDir,
    events: list[dict[str, Any]],
    scanned: dict[str, list[Scanned]],
    others: list[dict[str, Any]] | None = None,
    *,
    repair: bool = False,
    digests: dict[str, list[str | None]],
) -> list[str]:
    """The rollout files against the log's rollout events, each file's sha256 held to its event's."""
    rest = [] if others is None else others
    held = len(rest)
    last, quarantined = _last_rollouts(events, rest)
    rollout_events = len(events) - (len(rest) - held)
    # keys paid twice, by the rule a decision refuses them by (..log.paid_by.Doubles); none when no
    # key has a second rollout event
    problems = [] if rollout_events <= len(last) else paid_twice(events, rundir.rollout_file)
    remaining = dict(last)  # the logged keys no file has been found for yet
    tampered: list[tuple[str, str | None]] = []  # (file relative to the run dir, its sha256 as read)
    for split, files in scanned.items():
        hashed = digests.get(split) or [None] * len(files)
        for seen_file, digest in zip(files, hashed, strict=True):
            rel = f"rollouts/{split}/{seen_file[0]}"
            said = _file_against_log(split, seen_file, digest, remaining, last)
            if said is None:
                continue
            problems += said[0]
            if said[1]:
                tampered.append((rel, digest))
    if tampered and repair:
        problems = _quarantine_tampered(rundir, tampered, problems)
    missing = _missing(remaining, last, quarantined, rundir.rollout_file)
    if missing and repair:
        _log_gone(rundir, missing)
    return problems + list(missing.values())


def _last_rollouts(events: list[dict[str, Any]], rest: list[dict[str, Any]]) -> tuple[Logged, dict[str, int]]:
    """The last rollout event per key and each file's last move; every other event goes to ``rest``."""
    last: Logged = {}
    quarantined: dict[str, int] = {}  # file (relative) -> seq of its last quarantine or vanish
    for event in events:
        if event.get("kind") == ROLLOUT:
            last[_key(event)] = event
            continue
        rest.append(event)
        for file in moved_files(event):
            quarantined[file] = int(event.get("seq", 0))
    return last, quarantined


def _file_key(split: str, seen_file: Scanned) -> tuple[Key, Any, Any]:
    if type(seen_file) is tuple:  # a file as a session writes it, in its split's folder
        _, _, tag, task_id, trial, reward, error, _ = seen_file  # (rollout_scan's Row)
        return (split, str(task_id), str(tag), int(trial)), reward, error
    data, failed = data_of(seen_file, split), error_of(seen_file)
    if failed is not None:
        raise ValueError(failed)
    key = (str(data["split"]), str(data["task_id"]), str(data["tag"]), int(data["trial"]))
    return key, data.get("reward"), data.get("infra_error")


def _file_against_log(
    split: str, seen_file: Scanned, digest: str | None, remaining: Logged, last: Logged
) -> tuple[list[str], bool] | None:
    """One file against its rollout event: its problems and whether to quarantine it; None: it agrees."""
    rel = f"rollouts/{split}/{seen_file[0]}"
    try:
        key, reward, error = _file_key(split, seen_file)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return [f"{rel}: unreadable ({exc}); the next session quarantines it and pays it again"], False
    logged = remaining.pop(key, None)
    if logged is None:
        logged = last.get(key)  # (a second file holding the same key)
    if logged is None:
        return [f"{rel}: no rollout event records it (written outside a session?)"], False
    # the bytes as the event recorded them: an edit of the output, trace, feedback... leaves the
    # reward alone
    if reward == logged.get("reward") and error == logged.get("infra_error"):
        if digest is None or digest == logged.get("sha256"):
            return None
        return [
            f"{rel}: its bytes differ from what its rollout event (seq {logged.get('seq')}) "
            "recorded (sha256): edited after it was written (`capevolve verify --repair` "
            "quarantines it, so it is paid again)"
        ], True
    return [
        f"{rel}: {field} {in_file!r} in the file, but its rollout event "
        f"(seq {logged.get('seq')}) recorded {field} {logged.get(field)!r}"
        for field, in_file in (("reward", reward), ("infra_error", error))
        if in_file != logged.get(field)
    ], True


def _missing(
    remaining: Logged, last: Logged, quarantined: dict[str, int], rollout_file: Callable[[Key], str]
) -> dict[str, str]:
    """Logged rollouts whose file is gone with no quarantine or vanish since: file → problem."""
    missing: dict[str, str] = {}
    for key in sorted(remaining):
        event, rel = last[key], rollout_file(key)
        if quarantined.get(rel, -1) < int(event.get("seq", 0)):
            missing[rel] = (
                f"{rel}: recorded by rollout event seq {event.get('seq')}, but the file is missing "
                "(`capevolve verify --repair` logs it as gone, so the next session pays it again)"
            )
    return missing


def _log_gone(rundir: RunDir, missing: dict[str, str]) -> None:
    """``--repair``: files still gone are logged as ``rollout_vanished`` and taken off ``missing``."""
    with rundir.lock():
        gone = [rel for rel in missing if not (rundir.root / rel).exists()]
        log_vanished(rundir.log, rundir.notices, gone)
    for rel in gone:
        del missing[rel]


def _quarantine_tampered(
    rundir: RunDir, tampered: list[tuple[str, str | None]], problems: list[str]
) -> list[str]:
    """``--repair``: each file that differs from its event, still as read, is quarantined (paid again).
    A test file stays reported: test is scored once, so it would never be paid again."""
    moved: set[str] = set()  # and, since the log was read, paid again as they are now: the log's
    with rundir.lock():
        logged = rundir.rollouts.digests.current()  # the log as it is now, not as it was read
        for rel, digest in tampered:
            if rel.startswith(f"rollouts/{TEST_SPLIT}/"):
                continue
            path = rundir.root / rel
            try:
                raw = read_plain_bytes(path)
            except OSError:
                continue
            now = hashlib.sha256(raw).hexdigest()
            if digest is not None and now != digest:
                continue
            if now in (logged.get(key) for key in _keys_in(raw, rel)):
                moved.add(rel)  # a session recorded it after the log was read (a redraw): it stays
                continue
            rundir.rollouts.quarantine(
                path, "not what its rollout event recorded: edited after it was written"
            )
            moved.add(rel)
    return [line for line in problems if not any(line.startswith(f"{rel}: ") for rel in moved)]


def _keys_in(raw: bytes, rel: str) -> list[tuple[str, str, str, int]]:
    """The key a rollout file's bytes name (none if they name none), as the logged digests key it
    (split, tag, task id, trial)."""
    try:
        record = RolloutRecord.loads(raw.decode("utf-8"), rel)
    except (RecordError, UnicodeDecodeError):
        return []
    return [(record.split, record.tag, record.task_id, int(record.trial))]


def _key(event: dict[str, Any]) -> Key:
    return (str(event["split"]), str(event["task_id"]), str(event["tag"]), int(event["trial"]))
