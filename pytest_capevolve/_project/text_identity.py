"""Bytes that say the same text: a candidate whose files differ from another's only in line
endings or trailing whitespace.

A candidate is its bytes, and an exact repeat is refused (:mod:`.._policy.identity`). A red
team then re-proposed refuted bytes with a trailing space, CRLF line endings or a newline at
the end: new bytes, paid again and judged afresh at the session's level, with nothing saying
what they repeated. Those edits change nothing a reader of the text sees, so the text hash
folds them: per file, CR LF and CR become LF, each line loses its trailing whitespace, and the
trailing blank lines go. A file that is not UTF-8 text (a NUL byte, invalid UTF-8) counts by its
bytes. Paths count as they are: an added file, even an empty one, is a real change (a flag file,
an ``__init__.py``), and so is a comment — what a comment means is the file type's business, and
to an LLM reading a prompt it is text like any other.

Pure reads.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .candidate import iter_files


def normalized_text(data: bytes) -> bytes:
    """``data`` as the text hash reads it (unchanged when it is not UTF-8 text)."""
    if b"\0" in data:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).rstrip("\n").encode("utf-8")


def text_hash(root: Path) -> str:
    """sha256 over (relative path, normalized text) of every file: equal when two trees differ
    in line endings and trailing whitespace at most."""
    root = root.resolve()
    digest = hashlib.sha256()
    for path in iter_files(root):
        rel = path.relative_to(root).as_posix().encode("utf-8")
        data = normalized_text(path.read_bytes())
        digest.update(len(rel).to_bytes(8, "big") + rel)
        digest.update(len(data).to_bytes(8, "big") + data)
    return "text-sha256:" + digest.hexdigest()
