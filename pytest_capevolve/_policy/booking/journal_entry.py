"""A round's journal entry, frozen when its round is decided: the only journal text a later round is shown.

A work copy's ``JOURNAL.md`` sits where the next optimizer can rewrite it, so at its first decision a round's
own text is escaped (nothing it wrote can pass for the carry-forward's structure), cut, written to
``journals/<tag>.md`` and its sha256 logged in the ``decision`` event."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

from ..._project.candidate import read_plain
from ..._store.files import atomic_write_text
from ..._store.rundir import RunDir

JOURNAL = "JOURNAL.md"
JOURNAL_MARKER = "<!-- capevolve: append '## Iteration <tag>' entries below this line -->"
ENTRY_LIMIT = 4000  # a round's entries as carried forward: the head, cut
DIGEST_KEY = "journal_sha256"  # the decision event's field holding the frozen entry's digest

# a line a Markdown reader (or a model reading the raw text) takes for structure: an ATX
# heading, a setext underline or thematic break, an HTML block (the marker is an HTML comment)
_STRUCTURE = re.compile(r"^([ \t]*)(#|=+[ \t]*$|-+[ \t]*$|_+[ \t]*$|\*+[ \t]*$|<)")
_LINE_BREAKS = re.compile("\r\n|[\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029]")  # what str.splitlines splits on


def own_entries(text: str) -> str:
    """The text below a journal's last marker (all of it without one), cut to :data:`ENTRY_LIMIT`."""
    mine = text.rsplit(JOURNAL_MARKER, 1)[-1].strip()
    if len(mine) > ENTRY_LIMIT:
        mine = mine[:ENTRY_LIMIT].rstrip() + f"\n... (cut: {len(mine) - ENTRY_LIMIT} characters left out)"
    return mine


def escaped(text: str) -> str:
    """``text`` with nothing that reads as structure: control and format characters as ``[U+XXXX]``, and a
    backslash before a line start that would open a heading, underline, rule or HTML block."""
    text = _LINE_BREAKS.sub("\n", text)
    visible = "".join(
        ch if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf") else f"[U+{ord(ch):04X}]"
        for ch in text
    )
    return "\n".join(_STRUCTURE.sub(r"\1\\\2", line) for line in visible.split("\n"))


def freeze_entry(rundir: RunDir, tag: str) -> str:
    """Freeze ``tag``'s journal text at its first decision; returns the digest to log."""
    for event in rundir.decisions():
        if event.get("tag") == tag and isinstance(event.get(DIGEST_KEY), str):
            return str(event[DIGEST_KEY])
    text = ""
    for path in (rundir.hill_climb_dir(tag) / JOURNAL, rundir.work_dir(tag) / JOURNAL):
        if (data := read_plain(path)) is not None:
            text = escaped(own_entries(data.decode("utf-8", errors="replace")))
            break
    target = rundir.journal_entry_path(tag)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()
    atomic_write_text(target, text)
    return hashlib.sha256(target.read_bytes()).hexdigest()


def frozen_entry(rundir: RunDir, tag: str, decisions: list[dict[str, Any]] | None = None) -> str:
    """``tag``'s frozen entry as its decision logged it; a note in its place when it is gone or changed."""
    events = rundir.decisions() if decisions is None else decisions
    digest = next(
        (e[DIGEST_KEY] for e in events if e.get("tag") == tag and isinstance(e.get(DIGEST_KEY), str)), None
    )
    if digest is None:
        return "(no frozen entry: decided before journal entries were frozen at their decision)"
    path = rundir.journal_entry_path(tag)
    try:
        data = path.read_bytes() if not path.is_symlink() else b""
    except OSError:
        data = None
    if data is None or hashlib.sha256(data).hexdigest() != digest:
        return (
            f"(not shown: journals/{tag}.md is not the entry frozen at its decision — the log holds "
            "its digest — so it was edited or removed after the round was decided)"
        )
    return data.decode("utf-8", errors="replace")
