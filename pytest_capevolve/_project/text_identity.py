"""Bytes that say the same text: a candidate whose files differ from another's only in line
endings or trailing whitespace.

An exact repeat is refused (:mod:`.._policy.repeats.identity`); re-proposing refuted bytes with a
trailing space or CRLF endings must not make them new. So the text hash folds, per file, CR LF
and CR to LF, trailing whitespace and trailing blank lines. A file that is not UTF-8 text counts
by its bytes; paths and comments count as they are (an added empty file is a real change).
Pure reads."""

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
