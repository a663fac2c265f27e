"""The rollout record's codec: how a record travels in a test report and is decoded there.

Shipped as the ``capevolve_rollout`` user property; :func:`decode_record`'s one-slot cache makes
every hook reading the same report share one decode."""

from __future__ import annotations

from typing import Any

from .record import RecordError, RolloutRecord

RECORD_PROPERTY = "capevolve_rollout"
__all__ = ["RECORD_PROPERTY", "decode_record", "record_from_report", "record_text", "remember_decoded"]


# The last record decoded (or built) and its JSON: one slot, replaced whole, so a reader on
# another thread sees a consistent pair.
_last_decoded: tuple[str, RolloutRecord] | None = None


def remember_decoded(text: str, record: RolloutRecord) -> None:
    global _last_decoded
    _last_decoded = (text, record)


def decode_record(text: str, where: Any) -> RolloutRecord:
    """``RolloutRecord.loads(text)``, cached for the last ``text``."""
    last = _last_decoded
    if last is not None and (last[0] is text or last[0] == text):
        return last[1]
    try:
        record = RolloutRecord.loads(text)
    except RecordError:  # again, to name the report in the error
        RolloutRecord.loads(text, f"report of {where.nodeid}")
        raise
    remember_decoded(text, record)
    return record


def record_from_report(report: Any) -> RolloutRecord | None:
    text = record_text(report)
    return None if text is None else decode_record(text, report)


def record_text(report: Any) -> str | None:
    """The record's compact JSON as shipped (the controller writes the file from it)."""
    for name, value in getattr(report, "user_properties", ()):
        if name == RECORD_PROPERTY:
            return str(value)
    return None
