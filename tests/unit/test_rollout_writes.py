"""How a rollout file is written, and what a crash at any byte of it leaves: a new file is written
once under its final name (no temp file and rename), so a kill mid-write leaves a partial file that
no event vouches for; it is quarantined when read and the rollout is owed again. A file that exists
is replaced whole or not at all."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pytest_capevolve._store import files
from pytest_capevolve._store.readers.audit import audit
from pytest_capevolve._store.rundir import RunDir


def _keys(run: RunDir) -> dict[tuple, float | None]:
    return {r.key: r.reward for r in run.rollouts.indexed_rollouts("val")}


def _full_disk(fd: int, data: bytes) -> None:
    os.write(fd, data[:5])
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("kept", ["nothing", "half", "all but the newline"])
def test_a_new_rollout_file_a_kill_tore_is_quarantined_and_owed_again(
    tmp_path: Path, val_rollout, kept
) -> None:
    """A session killed while it wrote a new rollout file (before its event): whatever prefix of the
    bytes reached the disk, the file is not evidence; the rollout is missing until paid again."""
    run = RunDir(tmp_path / "run")
    run.rollouts.record_rollout(val_rollout("seed", "task-0", 0, 1.0))
    run.flush()
    torn = val_rollout("seed", "task-1", 0, 0.5)
    text = torn.dumps() + "\n"
    cut = {"nothing": 0, "half": len(text) // 2, "all but the newline": len(text) - 1}[kept]
    path = run.rollout_path("val", "task-1", "seed", 0)
    path.write_text(text[:cut])  # what record_rollout had written when the kill came
    reader = RunDir(run.root)
    assert _keys(reader) == {("val", "task-0", "seed", 0): 1.0}  # owed again, never read as a result
    assert not path.exists()
    assert len(list((run.root / "rollouts" / ".quarantine" / "val").iterdir())) == 1
    if kept == "nothing":  # the notice says what a user's Ctrl-C did, not "not JSON"
        assert any("empty: a write cut off" in notice for notice in reader.rollouts.notices)
    reader.rollouts.record_rollout(torn)  # paid again: written under its name, its event after it
    assert _keys(RunDir(run.root)) == {("val", "task-0", "seed", 0): 1.0, ("val", "task-1", "seed", 0): 0.5}
    assert path.read_text() == text
    assert [p for p in audit(RunDir(run.root)) if "task-1" in p] == []


def test_a_new_file_whose_write_fails_is_removed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(files, "_write_all", _full_disk)
    with pytest.raises(OSError, match="No space left"):
        files.write_new_text(tmp_path / "a" / "x.json", '{"a": 1}\n')
    assert list((tmp_path / "a").iterdir()) == []


def test_a_rollout_paid_again_replaces_its_file_whole_or_not_at_all(
    tmp_path: Path, val_rollout, monkeypatch
) -> None:
    """An existing file is never written in place: the exclusive create refuses it, and the
    replacement goes through a temp file, so a failed write leaves the recorded file as it was."""
    run = RunDir(tmp_path / "run")
    run.rollouts.record_rollout(val_rollout("seed", "task-0", 0, 1.0))
    path = run.rollout_path("val", "task-0", "seed", 0)
    before = path.read_bytes()
    assert files.write_new_text(path, "{}\n") is None and path.read_bytes() == before
    with monkeypatch.context() as patched:
        patched.setattr(files, "_write_all", _full_disk)
        with pytest.raises(OSError, match="No space left"):
            run.rollouts.record_rollout(val_rollout("seed", "task-0", 0, 0.0))
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left either
    assert _keys(RunDir(run.root)) == {("val", "task-0", "seed", 0): 1.0}
    run.rollouts.record_rollout(val_rollout("seed", "task-0", 0, 0.0))  # paid again, replaced whole
    assert _keys(RunDir(run.root)) == {("val", "task-0", "seed", 0): 0.0}


def test_a_file_judged_before_its_event_was_appended_is_not_quarantined(tmp_path: Path, val_rollout) -> None:
    """A reader judges files without the lock: one that took the log's outcomes while a writer was
    between a new file and its event finds the file unrecorded; judged again under the lock, the
    file is the log's and stays (before, it was moved aside and the rollout paid twice)."""
    run = RunDir(tmp_path / "run")
    run.rollouts.record_rollout(val_rollout("seed", "task-0", 0, 1.0))
    path = run.rollout_path("val", "task-0", "seed", 0)
    reader = RunDir(run.root)
    read = reader.rollouts._read_one(path, {}, {})  # outcomes and digests as before the event
    assert read is not None and read.reward == 1.0
    assert path.exists() and not (run.root / "rollouts" / ".quarantine").exists()
    assert reader.notices == []


_PLANTED = [
    "a link to a file outside",
    "a dangling link",
    "a hard link",
    "a FIFO",
    "a folder",
    "the right bytes",
]


def _plant(path: Path, kind: str, outside: Path, bytes_of_a_pass: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "a link to a file outside":
        path.symlink_to(outside)
    elif kind == "a dangling link":
        path.symlink_to(outside.with_name("nowhere.json"))
    elif kind == "a hard link":
        os.link(outside, path)
    elif kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "a folder":
        path.mkdir()
    else:
        path.write_text(bytes_of_a_pass)


def _paid_over_what_was_planted(run: RunDir, path: Path, outside: Path, val_rollout) -> None:
    """task-1's honest payment replaces what was planted at its path: its bytes there, never written
    through a link (the target outside untouched), and verify names nothing of it."""
    honest = val_rollout("seed", "task-1", 0, 0.0)
    run.rollouts.record_rollout(honest)
    assert not path.is_symlink() and path.read_text() == honest.dumps() + "\n"
    assert outside.read_text() == "outside\n"
    assert [p for p in audit(RunDir(run.root)) if "task-1" in p] == []


@pytest.mark.attack(
    "record",
    attack=(
        "unconfined: a link (to a file outside, or dangling), a hard link, a FIFO, a folder or a pass's "
        "bytes with no event planted at a rollout's path before it is paid, a session or `verify` "
        "reading the split in between (a FIFO hung every reader of the split, before)"
    ),
    outcome=(
        "prevented: a rollout file is read without following a link or waiting on a FIFO, and what is "
        "not the log's regular file is quarantined; the payment creates its file exclusively or "
        "replaces what is there, never writing through it: the honest outcome is recorded, the link's "
        "target untouched"
    ),
)
@pytest.mark.parametrize("kind", _PLANTED)
def test_what_is_planted_at_a_future_rollouts_path_is_never_a_result_nor_written_through(
    tmp_path: Path, val_rollout, kind
) -> None:
    run = RunDir(tmp_path / "run")
    run.rollouts.record_rollout(val_rollout("seed", "task-0", 0, 1.0))
    run.flush()
    outside = tmp_path / "outside.json"
    outside.write_text("outside\n")
    path = run.rollout_path("val", "task-1", "seed", 0)
    _plant(path, kind, outside, val_rollout("seed", "task-1", 0, 1.0).dumps() + "\n")
    assert audit(RunDir(run.root)) is not None  # verify mid-session reads the split, and returns
    assert _keys(RunDir(run.root)) == {("val", "task-0", "seed", 0): 1.0}  # a session reads it
    assert not os.path.lexists(path)  # moved aside: not the log's
    _paid_over_what_was_planted(run, path, outside, val_rollout)
    assert _keys(RunDir(run.root)) == {("val", "task-0", "seed", 0): 1.0, ("val", "task-1", "seed", 0): 0.0}


@pytest.mark.attack(
    "record",
    attack=(
        "unconfined: a link (to a file outside, or dangling), a hard link, a FIFO, a folder or a pass's "
        "bytes with no event planted at a rollout's path before it is paid, a session or `verify` "
        "reading the split in between (a FIFO hung every reader of the split, before)"
    ),
    note=(
        "planted while the session runs, no reader in between: the payment replaces it; a folder is "
        "quarantined first (before, the write failed, the session stopped, and the next session drew "
        "the rollout afresh: a re-roll for unconfined candidate code that planted it when failing)"
    ),
)
@pytest.mark.parametrize("kind", _PLANTED)
def test_what_is_planted_just_before_a_payment_is_replaced_by_it(tmp_path: Path, val_rollout, kind) -> None:
    run = RunDir(tmp_path / "run")
    outside = tmp_path / "outside.json"
    outside.write_text("outside\n")
    path = run.rollout_path("val", "task-1", "seed", 0)
    _plant(path, kind, outside, val_rollout("seed", "task-1", 0, 1.0).dumps() + "\n")
    _paid_over_what_was_planted(run, path, outside, val_rollout)
    assert _keys(RunDir(run.root)) == {("val", "task-1", "seed", 0): 0.0}


@pytest.mark.attack(
    "record",
    attack=(
        "`capevolve verify --repair` run while a session pays a rollout again (a redraw after an infra "
        "error): the file the session wrote between verify's read of the log and its scan of the files "
        "was quarantined as edited, so an honest rollout was owed and paid again"
    ),
    outcome=(
        "prevented: under the lock, a file is quarantined only if its bytes are not what the log "
        "records now; one a session recorded since stays, and verify names nothing"
    ),
)
def test_verify_repair_racing_a_redraw_leaves_the_recorded_file(
    tmp_path: Path, val_rollout, monkeypatch
) -> None:
    from pytest_capevolve._store.readers import audit as verify

    run = RunDir(tmp_path / "run")
    run.rollouts.record_rollout(val_rollout("seed", "task-0", 0, None, infra="API down"))
    run.flush()
    scan = verify.scan_rollouts

    def paid_again_then_scanned(root: Path):
        RunDir(root).rollouts.record_rollout(val_rollout("seed", "task-0", 0, 1.0))  # a session, meanwhile
        return scan(root)

    monkeypatch.setattr(verify, "scan_rollouts", paid_again_then_scanned)
    assert verify.audit(RunDir(run.root), repair=True) == []
    monkeypatch.setattr(verify, "scan_rollouts", scan)
    assert not (run.root / "rollouts" / ".quarantine").exists()
    assert _keys(RunDir(run.root)) == {("val", "task-0", "seed", 0): 1.0}
    assert audit(RunDir(run.root)) == []
