"""The hash chain of ``events.jsonl``, read: an edited, removed or reordered line shows here.

The chain is plain sha256: a log rewritten whole still verifies, unless a line hash was copied
where the rewriter cannot write (a CI artifact, a pushed git store) as an anchor: ``verify --anchor
HASH`` fails unless the log still holds that line."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import SCAN_ONCE

if TYPE_CHECKING:
    from .events import EventLog

GENESIS = "0" * 64


def event_line_hash(line: str) -> str:
    return hashlib.sha256(line.rstrip("\n").encode("utf-8")).hexdigest()


def verify_events(path: Path) -> tuple[int, str | None]:
    """(lines intact before the first problem, the problem), or (all lines, None). An edited line
    breaks the next line's ``prev``, a removed or reordered one ``seq``. The chain cannot vouch
    for its own end: an edit to the last line, or lines cut off, leave no trace."""
    with path.open("rb") as handle:
        raw = handle.read()
        stat = os.fstat(handle.fileno())
    parsed = _intact_chain(raw)  # the common case, found in one pass; any doubt: line by line
    if parsed is None:
        count, problem, parsed = walk_chain(raw)
        if problem is not None:
            return count, problem
    if stat.st_size == len(raw):  # nothing appended while it was read: the events are the file's
        _VERIFIED[str(path.resolve())] = ((stat.st_size, stat.st_mtime_ns, stat.st_ino), parsed)
    return len(parsed), None


def walk_chain(raw: bytes) -> tuple[int, str | None, list[dict[str, Any]]]:
    """:func:`verify_events` line by line, with the events parsed up to the problem."""
    prev_hash, prev_seq = GENESIS, 0
    # universal newlines, as text-mode reading gave: a line's hash is of its text without \r
    lines = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    parsed: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        try:
            event = json.loads(line)
            seq, prev = int(event["seq"]), str(event["prev"])
            parsed.append(event)
        except (ValueError, KeyError, TypeError):
            problem = f"line {number} is not an event (unreadable JSON or no seq/prev): edited"
            return number - 1, problem, parsed
        if seq != prev_seq + 1:
            expected = prev_seq + 1
            rest = enumerate(lines[number:], start=number + 1)
            later = next((n for n, text in rest if line_seq(text) == expected), None)
            if seq > expected and later is None:
                problem = f"line(s) with seq {expected}..{seq - 1} are missing before it"
            else:
                problem = f"seq {seq} after {prev_seq}: lines were reordered or duplicated"
                if later is not None:
                    problem += f" (seq {expected} is at line {later})"
            return number - 1, f"line {number}: {problem}", parsed
        if prev != prev_hash:
            if number == 1:
                return 0, "line 1 was edited: its prev is not the start of a chain", parsed
            return (
                number - 2,
                (
                    f"line {number - 1} was edited: line {number} records prev={prev[:12]}…, "
                    f"but line {number - 1} hashes to {prev_hash[:12]}…"
                ),
                parsed,
            )
        prev_hash, prev_seq = event_line_hash(line), seq
    return len(lines), None, parsed


def _intact_chain(raw: bytes) -> list[dict[str, Any]] | None:
    """The events of an intact chain, else None (any doubt: the caller walks the lines to say what
    is wrong); the same verdict two to three times faster."""
    if b"\r" in raw:  # universal newlines to apply first: the line-by-line walk does it
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = raw.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    sha256 = hashlib.sha256
    hashes = [sha256(line).hexdigest() for line in lines]
    parsed: list[dict[str, Any]] = []
    append, scan = parsed.append, SCAN_ONCE
    prev_hash, prev_seq, pos, end_of_text = GENESIS, 0, 0, len(text)
    try:
        for line_hash in hashes:
            event, end = scan(text, pos)
            if end != end_of_text and text[end] != "\n":  # more on the line than one value
                return None
            prev_seq += 1
            if event["seq"] != prev_seq or event["prev"] != prev_hash:
                return None
            append(event)
            prev_hash, pos = line_hash, end + 1
    except (ValueError, KeyError, TypeError, IndexError, StopIteration):
        return None
    return parsed if pos >= end_of_text else None


# the events of the last chain verified, by file, for the audit that follows it in the same
# command (``capevolve verify``): one parse of the log, not two
_VERIFIED: dict[str, tuple[tuple[int, int, int], list[dict[str, Any]]]] = {}


def verified_events(path: Path) -> list[dict[str, Any]] | None:
    """The events :func:`verify_events` just parsed from ``path`` if it is unchanged; taken once."""
    held = _VERIFIED.pop(str(path.resolve()), None)
    if held is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return held[1] if (stat.st_size, stat.st_mtime_ns, stat.st_ino) == held[0] else None


def prev_of(line: bytes) -> str | None:
    try:
        return str(json.loads(line)["prev"])
    except (ValueError, KeyError, TypeError):
        return None


def line_seq(line: str) -> int | None:
    try:
        return int(json.loads(line)["seq"])
    except (ValueError, KeyError, TypeError, IndexError):
        return None


ANCHOR_TRAILER = "capevolve-anchor"  # the git store's commit-message trailer: "capevolve-anchor: SEQ HASH"
_HASH = re.compile(r"[0-9a-f]{64}")
_TRAILER = re.compile(rf"^{ANCHOR_TRAILER}: (\d+) ([0-9a-f]{{64}})\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Head:
    """The last line of a log: its ``seq`` and its sha256."""

    seq: int
    hash: str

    def trailer(self) -> str:
        return f"{ANCHOR_TRAILER}: {self.seq} {self.hash}"


class AnchorError(ValueError):
    """An anchor that is not a line hash (64 lowercase hex digits): a usage error."""


def parse_anchor(text: str) -> str:
    """The line hash in ``text`` (a bare hash, or ``SEQ HASH``); a prefix is refused."""
    words = text.strip().lower().split()
    candidate = words[-1] if words else ""
    if not _HASH.fullmatch(candidate):
        raise AnchorError(
            f"--anchor {text.strip()!r} is not a log line's sha256 (64 hex digits, as "
            "`capevolve verify` prints after 'head')"
        )
    return candidate


def head(log: EventLog) -> Head:
    """The log's last line (seq 0 and the zero hash for an empty log)."""
    _, last_hash, seq = log.tail()
    return Head(seq, last_hash)


def find_anchor(events_path: Path, anchor: str) -> int | None:
    """The seq of the line whose sha256 is ``anchor`` (None: none)."""
    if not events_path.is_file():
        return None
    with open(events_path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip() and event_line_hash(line) == anchor:
                return line_seq(line) or 0
    return None


def anchor_in_message(message: str) -> str | None:
    found = _TRAILER.findall(message)
    return found[-1][1] if found else None
