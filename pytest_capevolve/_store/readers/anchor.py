"""The log's head and anchors to it: what detects a record rewritten end to end.

The hash chain is plain sha256: a log rewritten whole still verifies, unless a line hash was copied
where the rewriter cannot write (a CI artifact, a pushed git store): ``verify --anchor HASH`` fails
unless the log still holds that line."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..log.event_chain import event_line_hash
from ..log.events import EventLog

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
                return _seq_of(line)
    return None


def anchor_in_message(message: str) -> str | None:
    found = _TRAILER.findall(message)
    return found[-1][1] if found else None


def _seq_of(line: str) -> int:
    try:
        return int(json.loads(line)["seq"])
    except (ValueError, KeyError, TypeError):
        return 0
