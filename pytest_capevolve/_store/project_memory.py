"""What a project remembers beyond its run folders: append-only JSON lines kept twice.

A run's own log is the record of that run, but a run folder can be moved out of the project or
deleted, and then everything it decided or scored is forgotten by the next run. Facts that
must outlive a run folder — which test tasks were scored (:mod:`.project_seal`), which bytes
were decided (:mod:`.._policy.decision_memory`) — are also appended, one line per fact, to

- ``<project>/.capevolve/<kind>.jsonl`` (beside the runs, read by every later run), and
- ``$CAPEVOLVE_STATE_DIR/<kind>/<project digest>.jsonl`` (default ``~/.local/state/capevolve``),
  keyed by the project's absolute path: out of the project, the run dir and the candidate, so
  ``rm -rf .capevolve`` forgets nothing.

Readers take the union of the two. A garbled line is skipped, which can only under-count what an
adversary already had to erase elsewhere; the same OS user can still delete both (the threat
model's answer to that is the anchor kept where the optimizer cannot write).

**The marker** (issue 25): ``mv .capevolve elsewhere; export CAPEVOLVE_STATE_DIR=/tmp/empty``
puts both copies out of sight without deleting anything. So the project also carries
``<project>/capevolve.memory.json`` (beside the spec, outside ``.capevolve``): for each kind, how
many rows its memory holds, the digest of the newest and of every row, and every outside copy
it was written to, with the project's path then. Readers also read every copy the marker names (whatever
``$CAPEVOLVE_STATE_DIR`` says now, and under the project's old path after a move) and the
default state folder; and when what they can read no longer holds every row the marker
records, they raise :class:`MemoryOutOfSight`, one line naming the marker and both places,
rather than read an empty memory as a fresh project's. Deleting the marker as well is deleting
every copy: what no file-level guard can see (the anchor's business).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .files import RunDirError, atomic_write_json, exclusive
from .rundir import RUNS_DIR

STATE_DIR_ENV = "CAPEVOLVE_STATE_DIR"  # where the copy outside the project lives
MARKER = "capevolve.memory.json"  # in the project folder, beside the spec: what its memory holds
DIGEST_CHARS = 16  # of each row's sha256 the marker keeps (64 bits: rows told apart, the file small)


class MemoryOutOfSight(RunDirError):
    """The project's marker says its memory holds rows that no copy in sight holds."""


def inside_path(project_dir: Path, kind: str) -> Path:
    return project_dir / RUNS_DIR.parent / f"{kind}.jsonl"


def default_state_dir() -> Path:
    return Path.home() / ".local" / "state" / "capevolve"


def outside_path(project_dir: Path, kind: str, root: Path | None = None) -> Path:
    """The copy outside the project, under ``root`` (default ``$CAPEVOLVE_STATE_DIR``, else the
    default state folder), keyed by the project's absolute path."""
    folder = root or Path(os.environ.get(STATE_DIR_ENV) or default_state_dir())
    key = hashlib.sha256(str(project_dir.resolve()).encode("utf-8")).hexdigest()[:24]
    return folder / kind / f"{key}.jsonl"


def marker_path(project_dir: Path) -> Path:
    return project_dir / MARKER


def remember(project_dir: Path, kind: str, row: dict[str, Any]) -> None:
    """Append ``row`` to both copies (one ``write`` each), then move the marker on. The copy
    outside is best effort: an unwritable home is no reason to lose what the project's file and
    the log already hold. Under the project's memory lock: two sessions remembering at once
    leave the marker naming what both wrote."""
    inside = inside_path(project_dir, kind)
    inside.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(inside.parent / "memory.lock"):
        append_line(inside, json.dumps(row, sort_keys=True))
        outside = outside_path(project_dir, kind)
        try:
            append_line(outside, json.dumps({**row, "project": str(project_dir.resolve())}, sort_keys=True))
        except OSError:
            outside = None  # type: ignore[assignment]
        with contextlib.suppress(OSError):
            _mark(project_dir, kind, row, outside)


def _mark(project_dir: Path, kind: str, row: dict[str, Any], outside: Path | None) -> None:
    """The marker after ``row``: its kind's row count (every copy in sight, so a copy restored
    from elsewhere is counted), the newest row's digest, and the outside copies written to."""
    marker = read_marker(project_dir)
    entry = dict(marker["kinds"].get(kind) or {})
    copies = [str(c) for c in entry.get("outside") or [] if isinstance(c, str)]
    if outside is not None and str(outside) not in copies:
        copies.append(str(outside))
    held = {row_digest(r) for r, _ in _in_sight(project_dir, kind, marker)}
    # every row's digest (a prefix: enough to tell rows apart), not the newest alone: a row cut
    # from both copies while others pad the count is missed as surely as the newest
    rows = sorted({*(str(d) for d in entry.get("digests") or []), *(d[:DIGEST_CHARS] for d in held)})
    entry.update(rows=len(held), head=row_digest(row), digests=rows, outside=copies)
    projects = [str(p) for p in marker.get("projects") or [] if isinstance(p, str)]
    if str(project_dir.resolve()) not in projects:
        projects.append(str(project_dir.resolve()))
    marker.update(
        about="what this project's memory holds (pytest-capevolve): keep it with the project",
        projects=projects,
        kinds={**marker["kinds"], kind: entry},
    )
    atomic_write_json(marker_path(project_dir), marker)


def read_marker(project_dir: Path) -> dict[str, Any]:
    """The marker (an empty one when there is none, or it is not readable JSON)."""
    try:
        found = json.loads(marker_path(project_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        found = None
    if not isinstance(found, dict) or not isinstance(found.get("kinds"), dict):
        return {"kinds": {}}
    return found


def row_digest(row: dict[str, Any]) -> str:
    """A row as both copies hold it (the outside copy adds the project's path)."""
    same = {k: v for k, v in row.items() if k != "project"}
    return hashlib.sha256(json.dumps(same, sort_keys=True).encode("utf-8")).hexdigest()


def recalled(project_dir: Path, kind: str) -> list[tuple[dict[str, Any], str]]:
    """Every row of every copy in sight, with where it was read (``<kind>.jsonl`` or "outside
    the project"): the project's file, the copy under ``$CAPEVOLVE_STATE_DIR`` and under the
    default state folder, and every copy the marker names — their rows for this project only
    (a line names its project; the marker's projects count, for a project moved since).
    Raises :class:`MemoryOutOfSight` when these no longer hold what the marker records."""
    marker = read_marker(project_dir)
    found = _in_sight(project_dir, kind, marker)
    entry = marker["kinds"].get(kind)
    if isinstance(entry, dict) and isinstance(entry.get("head"), str) and int(entry.get("rows") or 0) > 0:
        digests = {row_digest(row) for row, _ in found}
        prefixes = {d[:DIGEST_CHARS] for d in digests}
        missing = [d for d in entry.get("digests") or [] if d not in prefixes]
        if entry["head"] not in digests or len(digests) < int(entry["rows"]) or missing:
            raise MemoryOutOfSight(_out_of_sight(project_dir, kind, entry, len(digests)))
    return [(row, source) for row, source in found]


def _in_sight(project_dir: Path, kind: str, marker: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    mine = {str(project_dir.resolve()), *(p for p in marker.get("projects") or [] if isinstance(p, str))}
    found = [(row, f"{kind}.jsonl") for row in _rows(inside_path(project_dir, kind))]
    entry = marker["kinds"].get(kind) if isinstance(marker["kinds"].get(kind), dict) else {}
    copies = [outside_path(project_dir, kind), outside_path(project_dir, kind, default_state_dir())]
    copies += [Path(c) for c in (entry or {}).get("outside") or [] if isinstance(c, str)]
    seen: set[str] = set()
    for copy in copies:
        if str(copy) in seen:
            continue
        seen.add(str(copy))
        found += [(row, OUTSIDE) for row in _rows(copy) if row.get("project") in mine]
    return found


def _out_of_sight(project_dir: Path, kind: str, entry: dict[str, Any], held: int) -> str:
    inside = inside_path(project_dir, kind)
    outside = [str(c) for c in entry.get("outside") or []] or ["no copy outside"]
    now = os.environ.get(STATE_DIR_ENV) or f"{default_state_dir()} (the default)"
    return (
        f"the project's memory of {kind} is out of sight: {marker_path(project_dir)} records "
        f"{entry['rows']} row(s) (newest {str(entry['head'])[:12]}) kept in {inside} and outside the "
        f"project in {', '.join(outside)}, but what can be read now ({inside}"
        f"{'' if inside.is_file() else ', missing'}; ${STATE_DIR_ENV} = {now}) holds {held}: what this "
        "project decided or scored before cannot be seen, so nothing is decided or scored as if it "
        "were new — put .capevolve back, or point $CAPEVOLVE_STATE_DIR at the folder that holds the copy"
    )


OUTSIDE = "outside the project"


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    # "\n" only: str.splitlines would split a row inside a value holding U+2028 (dropping it)
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            if isinstance(row, dict):
                rows.append(row)
    return rows


def append_line(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
