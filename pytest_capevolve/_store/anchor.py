"""The log's head and anchors to it: what detects a record rewritten end to end.

The hash chain of ``events.jsonl`` shows an edited, removed or reordered line, but it is plain
sha256: whoever rewrites every line (rewards edited, each ``prev`` recomputed, the caches
deleted) leaves a chain that verifies. What they cannot do is make the new chain pass through a
line hash that was copied somewhere they cannot write — a CI artifact, a pushed git store. That
copy is the anchor: ``capevolve verify`` prints the head (:func:`head`), ``verify --anchor HASH``
fails unless the log still holds that line (:func:`find_anchor`), and the chain then vouches for
everything before it. Reads only; called by the CLI and the hill-climb's store.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .event_chain import event_line_hash
from .events import EventLog

ANCHOR_TRAILER = "capevolve-anchor"  # the git store's commit-message trailer: "capevolve-anchor: SEQ HASH"
_HASH = re.compile(r"[0-9a-f]{64}")
_TRAILER = re.compile(rf"^{ANCHOR_TRAILER}: (\d+) ([0-9a-f]{{64}})\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Head:
    """The last line of a log: its ``seq`` (the event count of an intact chain) and its sha256."""

    seq: int
    hash: str

    def trailer(self) -> str:
        """The line the git store adds to each commit message."""
        return f"{ANCHOR_TRAILER}: {self.seq} {self.hash}"


class AnchorError(ValueError):
    """An anchor that is not a line hash (64 lowercase hex digits): a usage error."""


def parse_anchor(text: str) -> str:
    """The line hash in ``text`` (a bare hash, or ``SEQ HASH`` as :meth:`Head.trailer` and
    ``verify`` print it). A prefix is refused: the anchor is only as strong as its bits."""
    words = text.strip().lower().split()
    candidate = words[-1] if words else ""
    if not _HASH.fullmatch(candidate):
        raise AnchorError(
            f"--anchor {text.strip()!r} is not a log line's sha256 (64 hex digits, as "
            "`capevolve verify` prints after 'head')"
        )
    return candidate


def head(log: EventLog) -> Head:
    """The log's last line (seq 0 and the zero hash for a log with no events), read from its
    end only: a booking asks for it."""
    _, last_hash, seq = log.tail()
    return Head(seq, last_hash)


def find_anchor(events_path: Path, anchor: str) -> int | None:
    """The seq of the line of ``events_path`` whose sha256 is ``anchor`` (None: no line is).
    Whether the chain up to it is intact is :func:`.event_chain.verify_events`'s to say."""
    if not events_path.is_file():
        return None
    with open(events_path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip() and event_line_hash(line) == anchor:
                return _seq_of(line)
    return None


def anchor_in_message(message: str) -> str | None:
    """The newest anchor a commit message carries (:meth:`Head.trailer`), or None."""
    found = _TRAILER.findall(message)
    return found[-1][1] if found else None


def _seq_of(line: str) -> int:
    try:
        return int(json.loads(line)["seq"])
    except (ValueError, KeyError, TypeError):
        return 0
