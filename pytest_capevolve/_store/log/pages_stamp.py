"""``views.json``: what ``report.md`` and ``dashboard.html`` were last drawn from.

Anything in doubt (missing, unreadable, behind a rewritten log) means the pages are drawn again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..files import atomic_write_json, read_json


class PagesStamp:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def name(self) -> str:
        return self.path.name

    def read(self) -> dict[str, Any] | None:
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
