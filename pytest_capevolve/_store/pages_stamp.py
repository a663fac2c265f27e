"""``views.json``: what ``report.md`` and ``dashboard.html`` were last drawn from.

Written by :mod:`.._show.views` at the end of a session, after drawing the pages: the point of
the log they are current to and the other inputs they were drawn from. A view of the log
(:class:`.log_views.LogView`) whose only reader compares it whole: anything in doubt — the file
missing, unreadable, or behind a log that does not continue from its mark — means the pages are
drawn again, so it never disagrees in a way a reader would trust; its rebuild is its removal
(the next session draws the pages and writes it anew).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .files import atomic_write_json, read_json


class PagesStamp:
    """``views.json`` at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def name(self) -> str:
        return self.path.name

    def read(self) -> dict[str, Any] | None:
        """What the pages were last drawn from; None if unknown."""
        try:
            stamp = read_json(self.path)
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        return stamp if isinstance(stamp, dict) else None

    def write(self, stamp: dict[str, Any]) -> None:
        atomic_write_json(self.path, stamp)

    def catch_up(self) -> None:
        """Nothing: it is current only to the pages, which the session's end draws."""

    def check(self, events: list[dict[str, Any]], *, repair: bool) -> list[str]:
        return []  # compared whole by its reader: in doubt, the pages are drawn again

    def rebuild(self, problems: Sequence[str]) -> str:
        self.path.unlink(missing_ok=True)
        return f"{self.name}: removed; the next session draws the pages again"
