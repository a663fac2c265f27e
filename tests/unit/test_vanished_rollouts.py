"""A rollout file deleted by hand: the session that finds it gone says so, logs it
(``rollout_vanished``) and pays it again, and ``capevolve verify`` stays clean after that
re-pay; a deletion no session has seen yet is still reported by ``verify``."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_capevolve._session.selection import resume_command
from pytest_capevolve._store.readers.audit import audit
from pytest_capevolve._store.rundir import RunDir


def _events(rundir: Path, kind: str) -> list[dict]:
    lines = (rundir / "events.jsonl").read_text().splitlines()
    return [event for event in map(json.loads, lines) if event["kind"] == kind]


def test_a_file_another_session_quarantined_meanwhile_is_not_called_vanished(tmp_path, val_rollout) -> None:
    """Two sessions on one run: a row whose file another session has just moved aside (its
    ``rollout_quarantined`` logged, the shared index not yet caught up) is not a deletion."""
    writer = RunDir(tmp_path / "run")
    for t in range(3):
        writer.rollouts.record_rollout(val_rollout("seed", f"task-{t}", 0, 1.0))
    writer.flush()
    reader = RunDir(writer.root)
    assert len(reader.rollouts.indexed_rows("val")) == 3
    damaged = writer.rollout_path("val", "task-1", "seed", 0)
    writer.rollouts.quarantine(damaged, "damaged on purpose")  # logged; the index still has its row
    deleted = writer.rollout_path("val", "task-2", "seed", 0)
    deleted.unlink()  # by hand: nothing logged
    rows = reader.rollouts._checked_rows("val", None)  # what a check racing the quarantine sees
    assert [row[2] for row in rows] == ["task-0"]
    (event,) = _events(writer.root, "rollout_vanished")
    assert event["files"] == [deleted.relative_to(writer.root).as_posix()]
    assert not audit(RunDir(writer.root))


# -- the hint that says how to complete a session's missing rollouts -----------------------------


def test_the_completing_command_drops_every_form_of_deselection() -> None:
    typed = [
        "--capevolve-run", ".", "-k", "a", "-m", "not slow", "-kb", "-m=c", "--deselect", "x::y",
        "--deselect=z", "--lf", "--capevolve-new-run", "-p", "no:cacheprovider",
    ]  # fmt: skip
    assert resume_command(typed, "R", complete=True) == (
        "pytest --capevolve-run . -p no:cacheprovider --capevolve-run-id R"
    )
    # after Ctrl-C the interrupted selection is resumed as it was
    assert resume_command(["--capevolve-run", ".", "-m", "not slow"], "R") == (
        "pytest --capevolve-run . -m 'not slow' --capevolve-run-id R"
    )
