"""Bytes that say the same text: a candidate whose files differ from another's only in line
endings or trailing whitespace.

An exact repeat is refused (:mod:`.._policy.repeats.identity`); refuted bytes re-proposed with a
trailing space or CRLF endings must not count as new. A file that is not UTF-8 text counts by its
bytes; paths count as they are (an added empty file is a real change)."""

from __future__ import annotations

from pathlib import Path

from .candidate import tree_digest


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
    return "text-sha256:" + tree_digest(root, lambda path: normalized_text(path.read_bytes()))
