"""One JSON value from a file's text or a log line, as ``json.loads`` reads it, with less of
its cost per call: the run dir's readers decode 60,000 small documents at a time (every rollout
file for ``verify``, every line of ``events.jsonl`` for a view catching up), and ``json.loads``
spends a third of each call outside the C scanner (encoding detection, whitespace regexes).

The C scanner is called directly where the text is one value from its first character, with
nothing but JSON whitespace after it; anything else goes to ``json.loads`` itself, so the
value, or the error, is word for word what it gives.
"""

from __future__ import annotations

import json
from typing import Any

_SCAN_ONCE = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads's parser (C)
_WHITESPACE = " \t\n\r"  # JSON's, not str.isspace's


def loads_text(text: str) -> Any:
    """``json.loads(text)``."""
    try:
        value, end = _SCAN_ONCE(text, 0)
    except (StopIteration, ValueError):  # leading whitespace, or not JSON: json.loads says
        return json.loads(text)
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return json.loads(text)  # extra data after the value: its error
    return value


def loads_utf8(raw: bytes) -> Any:
    """``json.loads(raw.decode("utf-8"))`` (a rollout file: UTF-8 by contract)."""
    return loads_text(raw.decode("utf-8"))


def loads_bytes(raw: bytes) -> Any:
    """``json.loads(raw)``, bytes in whatever encoding it detects: a value opening with ``{"``
    is UTF-8 to its detection (no BOM, no zero byte first), and UTF-8 that decodes strictly
    reads as with its ``surrogatepass``; anything else is left to it."""
    if raw[:2] == b'{"':
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return json.loads(raw)
        return loads_text(text)
    return json.loads(raw)
