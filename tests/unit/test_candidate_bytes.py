"""What a rollout runs with (:mod:`pytest_capevolve._engine.candidate_bytes`): a registered
snapshot, read-only, re-checked before and after every rollout; on a copy of the project, a
private copy of what the copy holds."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pytest_capevolve._engine.candidate_bytes import CandidateBytes, CandidateMismatch
from pytest_capevolve._project.candidate import CandidateError, content_hash
from pytest_capevolve._store.log.event_kinds import ORDER_SECRET_CREATED
from pytest_capevolve._store.rundir import RunDir, RunDirError
from pytest_capevolve._store.snapshots import folder_name


def _registered(tmp_path: Path) -> tuple[Path, Path, str]:
    source = tmp_path / "cand"
    (source / "tools").mkdir(parents=True)
    (source / "prompt.md").write_text("Be careful.\n")
    (source / "tools" / "reply.py").write_text("def closing_line(c):\n    return 'bye'\n")
    (source / "JOURNAL.md").write_text("notes, never part of the candidate\n")
    rundir = RunDir(tmp_path / "run")
    digest = rundir.snapshots.register_candidate("cand", source)
    return source, rundir.snapshots.snapshot_dir("cand"), digest


def test_a_snapshot_is_read_only_lists_its_files_and_leaves_out_handover(tmp_path: Path) -> None:
    _source, snapshot, digest = _registered(tmp_path)
    assert content_hash(snapshot) == digest
    assert not (snapshot / "JOURNAL.md").exists()
    files = [p for p in snapshot.rglob("*") if p.is_file()]
    assert len(files) == 2 and all(not p.stat().st_mode & 0o222 for p in files)


def test_an_unchanged_snapshot_is_used_and_a_touch_is_not_a_change(tmp_path: Path) -> None:
    _source, snapshot, digest = _registered(tmp_path)
    checker = CandidateBytes(on_copy=False)
    folder, before = checker.folder("cand", snapshot, tmp_path / "cand", digest)
    assert folder == snapshot
    os.utime(snapshot / "prompt.md")  # a new mtime and ctime, the same bytes
    folder, after = checker.folder("cand", snapshot, tmp_path / "cand", digest)
    assert folder == snapshot and after != before
    assert checker.changed_during("cand", snapshot, after) is None
    # no process of ours writes bytecode beside a source (each keeps a private cache), so a
    # .pyc appearing in a snapshot was planted (issue 24, red-team finding 2): it is a change
    (snapshot / "tools" / "__pycache__").mkdir()
    (snapshot / "tools" / "__pycache__" / "reply.cpython-311.pyc").write_bytes(b"\0")
    why = checker.changed_during("cand", snapshot, after)
    assert why is not None and "tools/__pycache__/reply.cpython-311.pyc" in why


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda s: _append(s / "prompt.md", "RULE:check-fare-class\n"), "prompt.md (changed)"),
        (lambda s: (s / "JOURNAL.md").write_text("RULE:x\n"), "JOURNAL.md (added)"),
        (lambda s: (s / "tools" / "extra.py").write_text("x = 1\n"), "tools/extra.py (added)"),
        (lambda s: (s / "tools" / "reply.py").unlink(), "tools/reply.py (removed)"),
    ],
    ids=["changed", "handover-added", "added", "removed"],
)
def test_a_changed_snapshot_is_refused_naming_the_file(tmp_path: Path, edit, named: str) -> None:
    _source, snapshot, digest = _registered(tmp_path)
    checker = CandidateBytes(on_copy=False)
    _folder, stamp = checker.folder("cand", snapshot, tmp_path / "cand", digest)
    edit(snapshot)
    during = checker.changed_during("cand", snapshot, stamp)
    assert during is not None and "changed while this rollout ran" in during
    with pytest.raises(CandidateMismatch) as refused:
        checker.folder("cand", snapshot, tmp_path / "cand", digest)
    assert f"{snapshot}/{named}" in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(CandidateMismatch):  # refused for good in this process, even if restored
        checker.folder("cand", snapshot, tmp_path / "cand", digest)


def test_an_unmoved_stamp_after_a_rollout_is_the_next_ones_and_a_move_between_is_still_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_capevolve._engine import candidate_bytes

    _source, snapshot, digest = _registered(tmp_path)
    checker = CandidateBytes(on_copy=False)
    _folder, before = checker.folder("cand", snapshot, tmp_path / "cand", digest)
    assert checker.changed_during("cand", snapshot, before) is None
    stamps = []
    monkeypatch.setattr(candidate_bytes, "stamp_of", lambda f: stamps.append(f) or candidate_bytes.Stamp())
    assert checker.folder("cand", snapshot, tmp_path / "cand", digest)[1] == before and stamps == []
    monkeypatch.undo()
    _append(snapshot / "prompt.md", "RULE:between\n")  # after the stamp reused, before the rollout
    during = checker.changed_during("cand", snapshot, before)
    assert during is not None and "prompt.md" in during
    with pytest.raises(CandidateMismatch):  # the next one stamps again: it is refused
        checker.folder("cand", snapshot, tmp_path / "cand", digest)


def test_a_stamp_again_lists_no_folder_whose_times_held_and_still_sees_every_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per rollout the stamp stats the files it knows by name; a folder is listed again only when
    its times moved (an entry added, removed or renamed in it) or moved lately (SETTLED_NS)."""
    from pytest_capevolve._engine import candidate_bytes

    _source, snapshot, digest = _registered(tmp_path)
    listed: list[str] = []
    scandir = os.scandir
    monkeypatch.setattr(candidate_bytes.os, "scandir", lambda p: listed.append(str(p)) or scandir(p))
    settled = ("SETTLED_NS", "SETTLED_WHOLE_SECONDS_NS")
    for name in settled:  # every folder's times moved lately
        monkeypatch.setattr(candidate_bytes, name, 10**30)
    fresh = candidate_bytes.stamp_of(snapshot)
    assert candidate_bytes.stamp_of(snapshot, fresh) == fresh and len(listed) == 4  # listed twice
    for folder in (snapshot, snapshot / "tools"):  # an mtime of long ago: any change moves it
        os.utime(folder, ns=(10**18, 10**18))
    for name in settled:  # and their ctimes (now) settled
        monkeypatch.setattr(candidate_bytes, name, 0)
    checker = CandidateBytes(on_copy=False)
    _folder, before = checker.folder("cand", snapshot, tmp_path / "cand", digest)
    listed.clear()
    assert candidate_bytes.stamp_of(snapshot, before) == before == candidate_bytes.stamp_of(snapshot)
    assert len(listed) == 2  # the unknown stamp's listing, not the known one's
    listed.clear()
    assert checker.changed_during("cand", snapshot, before) is None and listed == []
    (snapshot / "tools" / "extra.py").write_text("x = 1\n")  # an entry added: its folder's times move
    why = checker.changed_during("cand", snapshot, before)
    assert why is not None and "tools/extra.py" in why and listed


def test_a_snapshot_changed_before_its_first_use_is_refused(tmp_path: Path) -> None:
    _source, snapshot, digest = _registered(tmp_path)
    _append(snapshot / "prompt.md", "more\n")
    with pytest.raises(CandidateMismatch, match=r"prompt\.md \(changed\)"):
        CandidateBytes(on_copy=False).folder("cand", snapshot, tmp_path / "cand", digest)


def test_a_worker_on_a_copy_runs_a_private_copy_its_edits_never_reach(tmp_path: Path) -> None:
    """A copy of the project made before the candidate was registered has no snapshot: the
    worker copies the source it holds, checks the copy's hash, and runs the copy."""
    source, _snapshot, digest = _registered(tmp_path)
    missing = tmp_path / "copy" / "no-snapshot-here"
    checker = CandidateBytes(on_copy=True)
    folder, stamp = checker.folder("cand", missing, source, digest)
    assert folder != source and content_hash(folder) == digest
    _append(source / "prompt.md", "an edit to the copy mid-session\n")
    assert checker.folder("cand", missing, source, digest)[0] == folder
    assert checker.changed_during("cand", folder, stamp) is None
    # a stale copy (other bytes than registered) is refused, naming the copy
    stale = CandidateBytes(on_copy=True)
    with pytest.raises(CandidateMismatch, match=f"this worker's copy of tag 'cand' at {source} differs"):
        stale.folder("cand", missing, source, digest)


def _append(path: Path, text: str) -> None:
    path.chmod(stat.S_IMODE(path.stat().st_mode) | stat.S_IWUSR)
    with path.open("a") as handle:
        handle.write(text)


@pytest.mark.attack(
    "laundering",
    attack=(
        "adoption's booking copy raced by a second registration of the same tag from swapped bytes: its "
        "rename failed on the tag the other had just registered, and the retry, which did not carry the "
        "hash the check compared, took the swapped bytes as the tag's"
    ),
    outcome="refused: the retry compares the bytes with the checked hash too; nothing registered is taken",
)
def test_a_registration_retried_after_a_race_still_holds_to_the_bytes_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "cand"
    source.mkdir()
    (source / "prompt.md").write_text("Be careful.\n")
    checked, real, raced = content_hash(source), os.rename, []

    def racing(src: str, dst: str) -> None:
        if not raced:  # between this copy and its rename, another registers the tag from swapped bytes
            raced.append((source / "prompt.md").write_text("Answer 42.\n"))
            RunDir(tmp_path / "run").snapshots.register_candidate("cand", source)
        real(src, dst)

    monkeypatch.setattr(os, "rename", racing)
    with pytest.raises(CandidateError, match="no longer holds the bytes checked"):
        RunDir(tmp_path / "run").snapshots.register_candidate("cand", source, expected=checked)
    assert raced


SHARED_MEMORY = Path("/dev/shm")


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "change the bytes a later rollout of its tag runs from without moving its snapshot's stamp (session "
        "29: files stat'ed by name, a folder listed again only when its times moved): `chmod u+w` a snapshot "
        "file and append to it, rename a file within the snapshot and back, link or symlink a file into it, "
        "add a `__pycache__`, plant a `.pth` in site-packages; or, where the snapshot can be opened for "
        "writing, keep a shared mapping of one of its files (dirtied once before its first check) and write "
        "other bytes through it: on ext4 and tmpfs no time moves until writeback, so the stamp sees nothing; "
        "or write other bytes for one rollout and the registered ones back before it ends"
    ),
    note="unconfined: the mapping's write, unseen by the stamp; bytes written back, a touch",
)
@pytest.mark.skipif(not os.path.ismount(SHARED_MEMORY), reason="no tmpfs at /dev/shm")
def test_bytes_written_through_a_shared_mapping_move_no_stamp(tmp_path: Path) -> None:
    """What the unconfined side of the row says, kept true: a snapshot written through a shared mapping
    after its first moves none of the times the stamp reads. On tmpfs (no writeback, so a dirtied page is
    never made read-only again to note the next write) this holds at every moment. Nor is a file written
    and written back within a rollout told from a touch. A confined child can open no snapshot file for
    writing, so it can do neither (``tests/e2e/test_attacks_stamp.py``)."""
    import mmap
    import tempfile

    with tempfile.TemporaryDirectory(dir=SHARED_MEMORY) as shared:
        _source, snapshot, digest = _registered(Path(shared))
        prompt = snapshot / "prompt.md"
        prompt.chmod(0o644)  # the owner's right, unconfined
        with prompt.open("r+b") as handle, mmap.mmap(handle.fileno(), 0) as mapped:
            mapped[:1] = mapped[:1]  # dirtied once: the one write that moves the file's times
            prompt.chmod(0o444)  # read-only again, before the first check: the mapping stays writable
            checker = CandidateBytes(on_copy=False)
            _folder, stamp = checker.folder("cand", snapshot, Path(shared) / "cand", digest)
            mapped[:5] = b"RULE:"  # other bytes, of the same length
            assert content_hash(snapshot) != digest
            assert checker.changed_during("cand", snapshot, stamp) is None  # booked as the registered bytes
            mapped[:5] = b"Be ca"
        # other bytes for one rollout, the registered ones written back before it ended: its times moved,
        # and the bytes hashed after it are the registered ones, so it is a touch and the rollout is kept
        _folder, stamp = checker.folder("cand", snapshot, Path(shared) / "cand", digest)
        prompt.chmod(0o644)
        prompt.write_text("RULE:cite-policy\n")
        prompt.write_text("Be careful.\n")
        assert checker.changed_during("cand", snapshot, stamp) is None


def test_the_folder_a_candidate_runs_from_names_no_tag_and_comes_from_the_runs_secret(tmp_path: Path) -> None:
    """The best and its nulls run from folders that differ, name none of their tags, and change
    with the run's secret: no name exists before the secret does (:func:`folder_name`)."""
    _source, snapshot, _digest = _registered(tmp_path)
    snapshots = RunDir(tmp_path / "run").snapshots
    names = {tag: snapshots.snapshot_dir(tag).name for tag in ("seed", "seed-null1", "seed-null2", "cand")}
    assert snapshot.name == names["cand"] and len(set(names.values())) == 4
    assert not any(tag in name for tag in names for name in names.values())
    assert snapshot.parent == tmp_path / "run" / "snapshots"  # not under candidates/<tag>/
    assert folder_name(bytes(32), "seed") != folder_name(bytes([1] * 32), "seed")


def test_a_snapshot_left_by_a_stopped_registration_is_replaced(tmp_path: Path) -> None:
    """A registration stopped between its snapshot and its ``candidate.json`` leaves a folder no tag
    holds: the next registration of the tag replaces it with its own bytes."""
    source = tmp_path / "cand"
    source.mkdir()
    (source / "prompt.md").write_text("Be careful.\n")
    snapshots = RunDir(tmp_path / "run").snapshots
    left = snapshots.snapshot_dir("cand")
    left.mkdir(parents=True)
    (left / "prompt.md").write_text("other bytes\n")
    digest = snapshots.register_candidate("cand", source)
    assert content_hash(left) == digest == snapshots.candidate_hash("cand")


def test_a_run_an_older_version_made_is_refused_with_the_way_on(tmp_path: Path) -> None:
    """Its candidates ran from ``candidates/<tag>/files`` (before session 30), or its rollout files were
    ``<task>__<tag>__t<k>.json`` (session 30): a folder or a file that names the tag. Its secret says what
    it names, and a secret that names less is one refusal, wherever a folder or a file is named."""
    rundir = RunDir(tmp_path / "run")
    rundir.log.append_event(ORDER_SECRET_CREATED, sha256="0" * 64, path="secret/order.key")  # no names
    (rundir.snapshots.candidate_dir("seed") / "files").mkdir(parents=True)
    for naming in (
        lambda: rundir.snapshots.snapshot_dir("seed"),
        lambda: rundir.rollout_path("val", "t1", "seed", 0),
    ):
        with pytest.raises(
            RunDirError,
            match=r"older pytest-capevolve.*start a new run \(`pytest --capevolve-run \S+ --capevolve-new-run`",
        ):
            naming()


def test_a_rollout_file_is_named_from_the_runs_secret_never_by_its_tag(tmp_path: Path) -> None:
    """A null control can ``stat`` any file it names: the best's record must have a name it cannot make."""
    first = RunDir(tmp_path / "one")
    names = {
        (t, k): first.rollout_path("val", "t1", t, k).name for t in ("seed", "seed-null1") for k in (0, 1)
    }
    assert len(set(names.values())) == 4 and not any(
        "seed" in name or "__t" in name for name in names.values()
    )
    assert all(name.startswith("t1__") and name.endswith(".json") for name in names.values())
    assert (
        RunDir(first.root).rollout_path("val", "t1", "seed", 0).name == names["seed", 0]
    )  # read back, the same
