"""The shared ledger (``shared_ledger:`` in the spec): what a project reads from it is the rows
of *other* projects, of the kind asked, whose tasks meet its own by content — never its own
rows (its memory's business), never another project's ids."""

from __future__ import annotations

from pathlib import Path

from pytest_capevolve._store.memory import shared_ledger


def test_only_other_projects_rows_meeting_this_pool_by_content_are_read(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    here, there = tmp_path / "here", tmp_path / "there"
    row = {"run_id": "r1", "val_ids": ["t01"], "val_keys": ["k1", "k2"]}
    shared_ledger.record(ledger, here, "decisions", row)
    shared_ledger.record(ledger, there, "decisions", row)
    shared_ledger.record(ledger, there, "test_seals", {"run_id": "r2", "test_keys": ["k1"]})
    shared_ledger.record(ledger, there, "decisions", {"run_id": "r3", "val_ids": ["t01"], "val_keys": ["k9"]})

    found = shared_ledger.meeting(ledger, here, "decisions", "val", ["k2", "k5"])
    assert [(r["run_id"], r["project"]) for r in found] == [("r1", str(there.resolve()))]
    # the same id with other content meets nothing; no keys, or no ledger, read nothing
    assert shared_ledger.meeting(ledger, here, "decisions", "val", ["k5"]) == []
    assert shared_ledger.meeting(ledger, here, "decisions", "val", []) == []
    assert shared_ledger.meeting(None, here, "decisions", "val", ["k1"]) == []


def test_no_ledger_named_writes_nothing_and_an_unwritable_one_loses_nothing(tmp_path: Path) -> None:
    shared_ledger.record(None, tmp_path, "decisions", {"run_id": "r1"})
    assert list(tmp_path.iterdir()) == []
    blocked = tmp_path / "file"
    blocked.write_text("")
    shared_ledger.record(blocked / "ledger.jsonl", tmp_path, "decisions", {"run_id": "r1"})  # no raise
    assert blocked.read_text() == ""
