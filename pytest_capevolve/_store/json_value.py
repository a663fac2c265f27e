"""One JSON value from a file's text or a log line, as ``json.loads`` reads it, but cheaper per call.

The C scanner is called directly where the text is one value from its first character; anything else
goes to ``json.loads``, so the value or error is word for word the same."""

from __future__ import annotations

import json
from typing import Any

_SCAN_ONCE = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads's parser (C)
_WHITESPACE = " \t\n\r"  # JSON's, not str.isspace's


def loads_text(text: str) -> Any:
    try:
        value, end = _SCAN_ONCE(text, 0)
    except (StopIteration, ValueError):  # leading whitespace, or not JSON: json.loads says
        return json.loads(text)
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return json.loads(text)  # extra data after the value: its error
    return value


def loads_utf8(raw: bytes) -> Any:
    return loads_text(raw.decode("utf-8"))


def loads_bytes(raw: bytes) -> Any:
    """``json.loads(raw)``: a value opening with ``{"`` is UTF-8 to its encoding detection."""
    if raw[:2] == b'{"':
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return json.loads(raw)
        return loads_text(text)
    return json.loads(raw)
