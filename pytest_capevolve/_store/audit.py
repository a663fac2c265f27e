"""Cross-checking a run dir against its event log: what ``capevolve verify`` adds to the chain.

The hash chain vouches for ``events.jsonl``; every ``rollout`` event records the key, the
reward and the infra error of what was persisted. So a rollout file whose reward differs from
its event, a file no event records, an event whose file is gone without a logged quarantine or
vanish, a rollout paid twice (a re-pay after either is expected), or a ``state.json`` that the
events do not add up to, is found here. Reads only (``repair=True`` rebuilds ``state.json`` from
the events, and logs a file gone by hand as ``rollout_vanished``, as a session that finds it
would, so its re-pay is expected; rollouts are never rewritten). Called by the CLI; no session
runs it.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from typing import Any

from .._project.splits import TEST_SPLIT
from .files import read_json
from .index import FIELDS, IndexDamaged
from .rollout_files import vanished_notice
from .rundir import RunDir

Key = tuple[str, str, str, int]


def audit(rundir: RunDir, *, repair: bool = False) -> list[str]:
    """One line per disagreement between the run's files and its events (empty: they agree),
    and between the rollout index and the files (``repair=True`` rebuilds it from them)."""
    events = rundir.log.events()
    return (
        _rollouts(rundir, events, repair=repair)
        + _state(rundir, events, repair=repair)
        + _index(rundir, repair=repair)
        + _unfinished_writes(rundir, repair=repair)
    )


def _unfinished_writes(rundir: RunDir, *, repair: bool) -> list[str]:
    """Temporary files of atomic writes that never completed (an interrupt that landed between
    creating one and renaming it). Never a record: the file it was to become is missing or
    older, and the event log says which. Removed by ``repair`` only while no other session is
    live, since a live one may be writing it right now."""
    leftovers = sorted(rundir.root.rglob(".*.tmp"))
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


def _key(event: dict[str, Any]) -> Key:
    return (str(event["split"]), str(event["task_id"]), str(event["tag"]), int(event["trial"]))


def _rollouts(rundir: RunDir, events: list[dict[str, Any]], *, repair: bool = False) -> list[str]:
    problems: list[str] = []
    last: dict[Key, dict[str, Any]] = {}
    valid: Counter[str] = Counter()  # valid rollout events per file since it was last moved or gone
    quarantined: dict[str, int] = {}  # file (relative) -> seq of its last quarantine or vanish
    for event in events:
        kind = event.get("kind")
        if kind == "rollout":
            key = _key(event)
            last[key] = event
            if event.get("infra_error") is None:
                valid[_rel(rundir, key)] += 1
        elif kind in ("rollout_quarantined", "rollout_vanished"):
            files = [event.get("file")] if kind == "rollout_quarantined" else event.get("files") or []
            for file in map(str, files):
                quarantined[file] = int(event.get("seq", 0))
                valid.pop(file, None)  # moved aside or gone: paying it again is expected
    for rel, count in sorted(valid.items()):
        if count > 1:
            problems.append(f"{rel}: paid {count} times (one valid rollout event each)")
    seen: set[Key] = set()
    for path in sorted((rundir.root / "rollouts").glob("*/*.json")):
        rel = path.relative_to(rundir.root).as_posix()
        if rel.startswith("rollouts/."):
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            key = _key(data)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            problems.append(f"{rel}: unreadable ({exc}); the next session quarantines it and pays it again")
            continue
        seen.add(key)
        event = last.get(key)
        if event is None:
            problems.append(f"{rel}: no rollout event records it (written outside a session?)")
            continue
        for field in ("reward", "infra_error"):
            if data.get(field) != event.get(field):
                problems.append(
                    f"{rel}: {field} {data.get(field)!r} in the file, but its rollout event "
                    f"(seq {event.get('seq')}) recorded {field} {event.get(field)!r}"
                )
    missing: dict[str, str] = {}  # file (relative) -> its problem
    for key, event in sorted(last.items()):
        rel = _rel(rundir, key)
        if key not in seen and quarantined.get(rel, -1) < int(event.get("seq", 0)):
            missing[rel] = (
                f"{rel}: recorded by rollout event seq {event.get('seq')}, but the file is missing "
                "(`capevolve verify --repair` logs it as gone, so the next session pays it again)"
            )
    if missing and repair:
        with rundir.lock():  # a session may have paid it again since: only what is still gone
            gone = [rel for rel in missing if not (rundir.root / rel).exists()]
            if gone:
                rundir.log.append_event("rollout_vanished", files=gone)
        if gone:
            rundir.notices.append(vanished_notice(gone, "logged as rollout_vanished"))
        for rel in gone:
            del missing[rel]
    return problems + list(missing.values())


def _rel(rundir: RunDir, key: Key) -> str:
    return rundir.rollout_path(*key).relative_to(rundir.root).as_posix()


def _state(rundir: RunDir, events: list[dict[str, Any]], *, repair: bool) -> list[str]:
    expected = rundir.state.replay_state()
    path = rundir.state_path
    try:
        state = read_json(path)
        assert isinstance(state, dict)
    except FileNotFoundError:
        state = None
        problems = [f"{path.name}: missing; the events add up to best {expected['best_id']!r}"]
    except (ValueError, AssertionError, UnicodeDecodeError):
        state = None
        problems = [f"{path.name}: unreadable"]
    if state is not None:
        problems = []
        checks = [("best_id", state.get("best_id"), expected["best_id"])]
        checks.append(("iterations", state.get("iterations"), expected["iterations"]))
        if any(e.get("kind") in ("stalled", "decision") for e in events):  # older logs did not record stalls
            checks.append(("stall", state.get("stall"), expected["stall"]))
        if isinstance(state.get("spent"), dict):  # the rollouts logged since it was written count
            state = rundir.state._with_recent_spend(dict(state))
        spent = state.get("spent") or {}
        checks.append(("spent.metric_calls", spent.get("metric_calls"), expected["spent"]["metric_calls"]))
        usd = spent.get("usd")
        if not (isinstance(usd, (int, float)) and math.isclose(usd, expected["spent"]["usd"], abs_tol=1e-9)):
            checks.append(("spent.usd", usd, expected["spent"]["usd"]))
        for name, value, want in checks:
            if value != want:
                problems.append(f"{path.name}: {name} is {value!r}, but the events add up to {want!r}")
    if problems and repair:
        with rundir.lock():
            if path.exists():
                os.replace(path, path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"))
            rundir.state._write_state(expected)
            rundir.log.append_event("state_rebuilt", problem="; ".join(problems), best_id=expected["best_id"])
        rundir.notices.append(f"{path.name}: rebuilt from the events ({len(problems)} disagreement(s))")
        return []
    return problems


def _index(rundir: RunDir, *, repair: bool) -> list[str]:
    """The index's rows against the files they stand for: a row whose numbers differ from its
    file (the index edited, or stale), a row without a file, a file without a row."""
    name = rundir.index.path.name
    if not repair and not rundir.index.path.exists():  # not even an empty one made: verify reads
        return [f"{name}: missing (the next session, or capevolve verify --repair, rebuilds it)"]
    try:
        with rundir.lock():
            rundir.rollouts.sync_index(
                rebuild=repair
            )  # a rebuild writes the run (a deletion it finds is logged)
        problems = []
        for split_dir in sorted((rundir.root / "rollouts").glob("*")):
            split = split_dir.name
            if not split_dir.is_dir() or split.startswith(".") or split == TEST_SPLIT:
                continue
            files = {path.name: path for path in split_dir.glob("*.json")}
            columns = (*FIELDS, "file", "size", "mtime_ns")
            rows = {
                row[len(FIELDS)]: dict(zip(columns, row, strict=True)) for row in rundir.index.rows(split)
            }
            for file, row in sorted(rows.items()):
                if file not in files:
                    problems.append(f"{name}: a {split} row for {file}, which is not on disk")
                    continue
                stat = files[file].stat()
                if (stat.st_size, stat.st_mtime_ns) != (row["size"], row["mtime_ns"]):
                    continue  # the file changed since: readers read it again (checked above)
                try:
                    data = json.loads(files[file].read_text(encoding="utf-8"))
                except (ValueError, UnicodeDecodeError, OSError):
                    continue  # reported above as unreadable
                for field in ("tag", "task_id", "trial", "reward", "infra_error", "cost_usd"):
                    if data.get(field) != row[field]:
                        problems.append(
                            f"{name}: {field} {row[field]!r} for rollouts/{split}/{file}, "
                            f"but the file says {data.get(field)!r}"
                        )
            problems += [
                f"{name}: no row for rollouts/{split}/{file}" for file in sorted(set(files) - set(rows))
            ]
    except IndexDamaged as exc:
        problems = [f"{name}: unusable ({exc})"]
    if problems and repair:
        with rundir.lock():
            rundir.rollouts.index_view._rebuild_index("verify --repair")
        rundir.notices.append(f"{name}: rebuilt from the rollout files ({len(problems)} disagreement(s))")
        return []
    return problems
