"""A round's journal entry, frozen when its round is decided: the only journal text a later
round is shown.

Used by :func:`.commit.book` (every decision: ``capevolve commit``, hill-climb, a
``--capevolve-commit auto`` session) and by :mod:`.._loop.journal`, which carries the frozen
entries forward into the next work copy's ``JOURNAL.md`` and ``prior_iterations/``.

Why frozen: a work copy's ``JOURNAL.md`` and hill-climb's copy of it sit in the run dir, where
the next optimizer (a coding agent with a shell) can rewrite them. Read when the next round
starts, an entry rewritten after its verdict — or an earlier round's — would pass for what that
round wrote. So at its first decision a round's own text (below the marker) is **escaped** —
every line that would open a Markdown heading, a setext underline, an HTML block or the marker,
every control character and every line separator, so nothing it wrote can pass for the
structure the carry-forward draws — cut to :data:`ENTRY_LIMIT` characters, written to
``journals/<tag>.md`` and its sha256 logged in the ``decision`` event. A later decision of the
same tag (a repair, a grown provisional) keeps the first entry. Reading it back checks the file
against that digest: an edited entry is shown as edited, never as the round's words.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import unicodedata
from pathlib import Path
from typing import Any

from .._store.files import atomic_write_text
from .._store.rundir import RunDir

JOURNAL = "JOURNAL.md"
JOURNAL_MARKER = "<!-- capevolve: append '## Iteration <tag>' entries below this line -->"
ENTRY_LIMIT = 4000  # a round's entries as carried forward: the head, cut
DIGEST_KEY = "journal_sha256"  # the decision event's field holding the frozen entry's digest

# a line a Markdown reader (or a model reading the raw text) takes for structure: an ATX
# heading, a setext underline or thematic break, an HTML block (the marker is an HTML comment)
_STRUCTURE = re.compile(r"^([ \t]*)(#|=+[ \t]*$|-+[ \t]*$|_+[ \t]*$|\*+[ \t]*$|<)")
_LINE_BREAKS = re.compile("\r\n|[\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029]")  # what str.splitlines splits on


def own_entries(text: str) -> str:
    """What a journal's own round wrote: the text below the last marker (all of it when the
    marker was removed), stripped and cut to :data:`ENTRY_LIMIT` characters."""
    mine = text.rsplit(JOURNAL_MARKER, 1)[-1].strip()
    if len(mine) > ENTRY_LIMIT:
        mine = mine[:ENTRY_LIMIT].rstrip() + f"\n... (cut: {len(mine) - ENTRY_LIMIT} characters left out)"
    return mine


def escaped(text: str) -> str:
    """``text`` with nothing left that reads as structure: every line break (``\\r``, a Unicode
    line separator, ...) made a newline, every other control or format character (an escape
    sequence, a zero-width or bidi mark) written as ``[U+XXXX]``, and a backslash before each
    line's first character that would open a heading, an underline, a rule or an HTML block."""
    text = _LINE_BREAKS.sub("\n", text)
    visible = "".join(
        ch if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf") else f"[U+{ord(ch):04X}]"
        for ch in text
    )
    return "\n".join(_STRUCTURE.sub(r"\1\\\2", line) for line in visible.split("\n"))


def _read_unlinked(path: Path) -> bytes | None:
    """The bytes of the regular file ``path``, opened without following a link (None when it is
    a link, missing or not a file). A check that it is no link, then a read by path, left a
    moment in which the optimizer, who writes the work copy, could make it one: the read (with
    the evaluator's rights) would then have frozen a gold file into the journal later rounds see."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read()


def freeze_entry(rundir: RunDir, tag: str) -> str:
    """Freeze ``tag``'s own journal text at its decision; returns the digest the decision event
    logs. The first decision freezes (its digest is reused by later ones); the text comes from
    hill-climb's copy (``hill_climb/<tag>/JOURNAL.md``) else the work copy's journal ("" when
    the round has none: a candidate gated from its own folder)."""
    for event in rundir.decisions():
        if event.get("tag") == tag and isinstance(event.get(DIGEST_KEY), str):
            return str(event[DIGEST_KEY])
    text = ""
    for path in (rundir.hill_climb_dir(tag) / JOURNAL, rundir.work_dir(tag) / JOURNAL):
        data = _read_unlinked(path)
        if data is not None:
            text = escaped(own_entries(data.decode("utf-8", errors="replace")))
            break
    target = rundir.journal_entry_path(tag)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()
    atomic_write_text(target, text)
    return hashlib.sha256(target.read_bytes()).hexdigest()


def frozen_entry(rundir: RunDir, tag: str, decisions: list[dict[str, Any]] | None = None) -> str:
    """``tag``'s frozen entry as its decision logged it; a note in its place when it was
    decided before entries were frozen, or its file is gone or no longer what was logged."""
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
