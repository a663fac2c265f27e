"""The cheap run dir: the rollout index (``index.sqlite``) and the spend read from the log.

The index is a cache of the rollout files: it must answer exactly what the files say, be rebuilt
(with a notice, never a crash) when deleted or damaged, be caught out by ``capevolve verify`` when
edited, and the gate and ``measure`` must answer the same with and without it. The spend is not
written per rollout: it must still equal the rollouts on disk after a ``kill -9``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from rollout_outcomes import outcomes

from pytest_capevolve._project.splits import TestSealError
from pytest_capevolve._store.log.paid_by import KINDS, untrusted
from pytest_capevolve._store.readers.audit import audit
from pytest_capevolve._store.rollouts.record import RolloutRecord
from pytest_capevolve._store.rundir import RunDir


@pytest.fixture
def run(tmp_path: Path, val_rollout) -> RunDir:
    """A run dir holding 2 tags × 5 tasks × 2 trials of val rollouts (one an infra error) and
    two train rollouts, persisted the way a session persists them."""
    rundir = RunDir(tmp_path / "run")
    for tag in ("seed", "cand"):
        for t in range(5):
            for k in range(2):
                infra = "timeout" if (tag, t, k) == ("cand", 3, 1) else None
                record = val_rollout(tag, f"task-{t}", k, None if infra else (t + k) % 3 / 2, infra)
                rundir.rollouts.record_rollout(_with(record, cost_usd=0.01 * (t + 1), passed=infra is None))
    for k in range(2):
        rundir.rollouts.record_rollout(_with(val_rollout("seed", "train-0", k, 1.0), split="train"))
    return rundir


def _rel(run: RunDir, task: str, tag: str, trial: int) -> str:
    """A val rollout's file relative to the run dir (named from the run's secret)."""
    return run.rollout_file(("val", task, tag, trial))


def _with(record: RolloutRecord, **changes) -> RolloutRecord:
    return RolloutRecord.from_json({**record.to_json(), **changes})


def test_the_index_answers_what_the_files_say(run: RunDir) -> None:
    for split in ("val", "train"):
        indexed = run.rollouts.indexed_rollouts(split)
        assert outcomes(indexed) == outcomes(run.rollouts.rollouts(split))
    assert len(run.rollouts.indexed_rollouts("val")) == 20
    only = run.rollouts.indexed_rollouts("val", ["cand"])
    assert {r.tag for r in only} == {"cand"} and len(only) == 10
    fresh = RunDir(run.root)  # another process: nothing of this one's memory
    assert outcomes(fresh.rollouts.indexed_rollouts("val")) == outcomes(run.rollouts.rollouts("val"))
    assert not fresh.notices


def test_the_index_never_offers_the_test_split(run: RunDir, val_rollout) -> None:
    run.rollouts.record_rollout(_with(val_rollout("seed", "held-out", 0, 1.0), split="test"))
    with pytest.raises(TestSealError):
        run.rollouts.indexed_rollouts("test")
    run.flush()
    db = sqlite3.connect(run.index.path)
    assert db.execute("SELECT count(*) FROM rollouts WHERE split = 'test'").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM rollouts").fetchone() == (22,)
    db.close()


@pytest.mark.parametrize("damage", ["deleted", "garbage", "foreign schema"])
def test_a_deleted_or_damaged_index_is_rebuilt_from_the_files_with_a_notice(run: RunDir, damage: str) -> None:
    expected = outcomes(run.rollouts.rollouts("val"))
    run.flush()
    run.index.close()
    if damage == "deleted":
        run.index.path.unlink()
    elif damage == "garbage":
        run.index.path.write_bytes(b"this is not a database" * 100)
    else:
        db = sqlite3.connect(run.index.path)
        db.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
        db.commit()
        db.close()
    reader = RunDir(run.root)
    assert outcomes(reader.rollouts.indexed_rollouts("val")) == expected
    assert any("index.sqlite" in n and "rebuilt from 22 rollout files" in n for n in reader.notices), (
        reader.notices
    )
    assert audit(reader) == []


def test_the_index_catches_up_with_rollouts_it_never_saw(run: RunDir, val_rollout) -> None:
    """A session killed before its rows were stored: the log says what landed, the files say
    what it was."""
    run.flush()
    writer = RunDir(run.root)
    writer.rollouts.record_rollout(val_rollout("late", "task-0", 0, 0.5))
    writer.index.pending.clear()  # its memory died with it
    reader = RunDir(run.root)
    late = [r for r in reader.rollouts.indexed_rollouts("val") if r.tag == "late"]
    assert [(r.task_id, r.reward) for r in late] == [("task-0", 0.5)]


@pytest.mark.attack(
    "record",
    attack="rewards edited in rollout files, with size and mtime kept",
)
def test_a_file_changed_or_damaged_after_indexing_is_read_again(run: RunDir) -> None:
    run.flush()
    folder = run.root / "rollouts" / "val"
    reformatted = run.rollout_path("val", "task-2", "seed", 0)
    reformatted.write_text(json.dumps(json.loads(reformatted.read_text()), indent=1) + "\n")
    changed = run.rollout_path("val", "task-0", "seed", 0)
    record = json.loads(changed.read_text())
    record["reward"] = 0.25
    changed.write_text(json.dumps(record) + "\n" * 7)  # another size: seen as changed
    damaged = run.rollout_path("val", "task-1", "seed", 0)
    damaged.write_text(damaged.read_text()[:20])
    reader = RunDir(run.root)
    by_key = {r.key: r for r in reader.rollouts.indexed_rollouts("val")}
    # read again: the same outcome as logged, but not the bytes its event recorded (sha256)
    assert ("val", "task-2", "seed", 0) not in by_key
    assert any("its bytes differ from what its rollout event" in n and "task-2" in n for n in reader.notices)
    # a reward edited in the file is not the logged one: quarantined, never used
    assert ("val", "task-0", "seed", 0) not in by_key
    assert any("but its rollout event logged reward" in n and "task-0" in n for n in reader.notices)
    assert ("val", "task-1", "seed", 0) not in by_key  # missing: paid again
    assert len(list((run.root / "rollouts" / ".quarantine" / "val").iterdir())) == 3
    assert outcomes(reader.rollouts.indexed_rollouts("val")) == outcomes(reader.rollouts.rollouts("val"))
    assert not damaged.exists() and not changed.exists() and not reformatted.exists() and folder.is_dir()


def test_verify_finds_an_edited_index_row_and_repair_rebuilds_it(run: RunDir) -> None:
    run.flush()
    run.index.close()
    db = sqlite3.connect(run.index.path)
    db.execute("UPDATE rollouts SET reward = 1.0 WHERE tag = 'seed' AND task_id = 'task-0' AND trial = 0")
    db.commit()
    db.close()
    problems = audit(RunDir(run.root))
    assert any("index.sqlite: reward 1.0" in p and "the file says 0.0" in p for p in problems), problems
    assert audit(RunDir(run.root), repair=True) == []
    fixed = {r.key: r.reward for r in RunDir(run.root).rollouts.indexed_rollouts("val")}
    assert fixed[("val", "task-0", "seed", 0)] == 0.0


def test_verify_blames_an_index_row_only_while_its_file_has_the_rows_size_and_mtime(run: RunDir) -> None:
    """The scan takes no stat per file: a row that disagrees with its file is blamed only if the
    file, stat'ed then, is what the row says it read (readers trust the row then); a file
    rewritten since, at the same size, is read again by every reader, so only the file's own
    disagreement with its event is reported."""
    run.flush()
    path = run.rollout_path("val", "task-0", "seed", 0)  # reward 0.0 in the file, its row and its event
    before = path.stat()
    text = path.read_text()
    path.write_text(text.replace('"reward": 0.0', '"reward": 1.0'))  # the same size, another mtime
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    assert path.stat().st_size == before.st_size
    problems = audit(RunDir(run.root))
    assert any(p.startswith(f"{_rel(run, 'task-0', 'seed', 0)}: reward 1.0 in the file") for p in problems)
    assert not [p for p in problems if p.startswith("index.sqlite")], problems
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the row's size and mtime again
    problems = audit(RunDir(run.root))
    assert f"index.sqlite: reward 0.0 for {_rel(run, 'task-0', 'seed', 0)}, but the file says 1.0" in problems


def test_verify_names_an_unfinished_write_and_repair_removes_it_unless_a_session_is_live(run: RunDir) -> None:
    run.flush()
    leftover = run.root / "rollouts" / "val" / ".task-0__seed__t0.json.abc123.tmp"
    leftover.write_text('{"tag": "se')  # an interrupt between mkstemp and the rename
    problems = audit(RunDir(run.root))
    assert problems == [
        "rollouts/val/.task-0__seed__t0.json.abc123.tmp: an unfinished write (an interrupted session; "
        "`capevolve verify --repair` removes it when no session is running)"
    ]
    live = RunDir(run.root)
    live.claims.take([("val", "task-9", "seed", 0)])  # another session is paying right now
    assert len(audit(RunDir(run.root), repair=True)) == 1 and leftover.exists()
    live.claims.release()
    repaired = RunDir(run.root)
    assert audit(repaired, repair=True) == [] and not leftover.exists()
    assert any("unfinished temporary file" in n for n in repaired.notices)


def test_verify_names_unfinished_writes_outside_the_rollout_folders_too(run: RunDir) -> None:
    """verify lists the rollout folders once, for their files and their leftovers alike; the rest
    of the run dir (its own files, a quarantine folder, a snapshot) is still looked through."""
    run.flush()
    (run.root / "rollouts" / ".quarantine").mkdir()
    leftovers = [
        run.root / ".state.json.12-1.tmp",
        run.root / "rollouts" / ".quarantine" / ".x.json.3-1.tmp",
        run.root / "rollouts" / "train" / ".train-0__seed__t0.json.9-2.tmp",
    ]
    for leftover in leftovers:
        leftover.write_text("{")
    (run.root / "rollouts" / "val" / "not.tmp").write_text("")  # no leading dot: not a temp file
    problems = audit(RunDir(run.root))
    named = sorted(p.split(":")[0] for p in problems if "an unfinished write" in p)
    assert named == sorted(str(p.relative_to(run.root)) for p in leftovers), problems
    assert audit(RunDir(run.root), repair=True) == []
    assert not any(p.exists() for p in leftovers)


def test_spend_is_exact_without_rewriting_state_json(run: RunDir) -> None:
    """Rollouts do not rewrite state.json; reading the state counts what the log added since."""
    written = json.loads(run.state_path.read_text()) if run.state_path.is_file() else None
    costs = sum(r.cost_usd for s in ("val", "train") for r in run.rollouts.rollouts(s))
    state = RunDir(run.root).state.read_state()
    assert state["spent"]["metric_calls"] == 22
    assert state["spent"]["usd"] == pytest.approx(costs)
    assert written is None or written["spent"]["metric_calls"] < 22  # not rewritten per rollout
    run.flush()
    flushed = json.loads(run.state_path.read_text())
    assert flushed["spent"]["metric_calls"] == 22 and flushed["spent_through"]["seq"] > 0
    assert RunDir(run.root).state.read_state()["spent"] == state["spent"]
    assert audit(RunDir(run.root)) == []


@pytest.mark.attack(
    "record",
    attack="a rollout file planted with no event",
    outcome="prevented: not evidence, quarantined",
)
def test_a_rollout_file_no_event_records_is_not_evidence(run: RunDir) -> None:
    """A file put there by hand (no event, no row): quarantined when read, never a rollout."""
    run.flush()
    source = run.rollout_path("val", "task-2", "seed", 1)
    copied = json.loads(source.read_text())
    copied.update(tag="copied", reward=0.75)
    planted = run.rollout_path("val", "task-2", "copied", 1)
    planted.write_text(json.dumps(copied))
    reader = RunDir(run.root)
    assert reader.rollouts.indexed_rollouts("val", ["copied"]) == []
    assert not planted.exists()
    assert any("no rollout event in the log records it" in n for n in reader.notices)
    assert outcomes(reader.rollouts.indexed_rollouts("val")) == outcomes(reader.rollouts.rollouts("val"))


def test_a_second_read_in_one_session_reuses_the_checked_rows_until_something_changes(
    run: RunDir, val_rollout
) -> None:
    first = run.rollouts.indexed_rollouts("val", ["seed", "cand"])
    run.log.append_event("session_started", split="val")  # not a rollout: the rows stand
    assert run.rollouts.indexed_rollouts("val", ["seed", "cand"]) is not first
    assert outcomes(run.rollouts.indexed_rollouts("val", ["seed", "cand"])) == outcomes(first)
    version = run.index.rows_version()
    run.rollouts.indexed_rollouts("val", ["seed", "cand"])
    assert run.index.rows_version() == version
    other = RunDir(run.root)  # another session pays one and brings the index up to date
    other.rollouts.record_rollout(val_rollout("seed", "task-9", 0, 1.0))
    other.flush()
    again = {r.key for r in run.rollouts.indexed_rollouts("val", ["seed", "cand"])}
    assert ("val", "task-9", "seed", 0) in again and run.index.rows_version() != version


def test_verify_opens_each_rollout_file_once_and_still_finds_every_kind_of_mismatch(
    run: RunDir, monkeypatch
) -> None:
    """One read of every file serves both checks (the log's and the index's): the same lines as
    reading the files again for the index, found with one open per rollout file."""
    import builtins

    run.flush()
    edited = run.rollout_path("val", "task-2", "cand", 1)
    record = json.loads(edited.read_text())
    record["reward"] = 1.0  # the file disagrees with its event and (same size) with its row
    edited.write_text(json.dumps(record, separators=(",", ":")))
    run.rollout_path("val", "task-4", "seed", 0).write_text("{not json")
    run.index.close()
    db = sqlite3.connect(run.index.path)
    db.execute(
        "UPDATE rollouts SET infra_error = 'x' WHERE tag = 'seed' AND task_id = 'task-1' AND trial = 1"
    )
    db.commit()
    db.close()
    opened: list[str] = []

    def counting(real_open):
        def counted(file, *args, **kwargs):
            if str(file).endswith(".json") and "/rollouts/" in str(file):
                opened.append(str(file))
            return real_open(file, *args, **kwargs)

        return counted

    monkeypatch.setattr(builtins, "open", counting(builtins.open))  # either way of opening a file
    monkeypatch.setattr(os, "open", counting(os.open))
    problems = audit(RunDir(run.root))
    monkeypatch.undo()
    files = sorted(str(p) for p in (run.root / "rollouts").glob("*/*.json"))
    assert sorted(opened) == files  # each file once, none twice
    index_view = RunDir(run.root).rollouts.index_view  # the index's check reading the files itself
    from_files = index_view.check([], repair=False)
    assert [p for p in problems if p.startswith("index.sqlite")] == from_files
    assert any(_rel(run, "task-1", "seed", 1) in p and "infra_error 'x'" in p for p in from_files), from_files
    assert any(p.startswith(f"{_rel(run, 'task-2', 'cand', 1)}: reward 1.0 in the file") for p in problems)
    assert any(p.startswith(f"{_rel(run, 'task-4', 'seed', 0)}: unreadable") for p in problems)


def test_verify_reads_a_file_missing_a_field_as_before(run: RunDir) -> None:
    """The scan keeps a file's fields as a tuple only when it holds every one; a file without
    one is checked field by field as before: no key is unreadable, an absent infra_error is
    None (as a reader takes it), and a file that is no object is unreadable."""
    run.flush()
    for task, field in (("task-0", "split"), ("task-1", "infra_error")):
        path = run.rollout_path("val", task, "seed", 0)
        record = json.loads(path.read_text())
        del record[field]
        path.write_text(json.dumps(record))
    run.rollout_path("val", "task-2", "seed", 0).write_text("[1, 2]")
    # JSON text around the object: whitespace is read as json.loads reads it, more is unreadable
    spaced = run.rollout_path("val", "task-3", "seed", 0)
    spaced.write_text(" \n" + spaced.read_text() + "\n\t ")
    extra = run.rollout_path("val", "task-4", "seed", 0)
    extra.write_text(extra.read_text() + " {}")
    # a file whose split is not its folder's: keyed by what it says, as before
    moved = run.rollout_path("val", "task-0", "cand", 0)
    record = json.loads(moved.read_text())
    moved.write_text(json.dumps({**record, "split": "train"}))
    problems = audit(RunDir(run.root))
    assert f"{_rel(run, 'task-0', 'cand', 0)}: no rollout event records it" in " ".join(problems)
    assert f"{_rel(run, 'task-0', 'cand', 0)}: recorded by rollout event" in " ".join(problems)
    # read as json.loads reads them (no field differs from the event), but not the bytes written
    for task in ("task-3", "task-1"):
        rel = _rel(run, task, "seed", 0)
        said = [p for p in problems if p.startswith(rel)]
        assert len(said) == 1, problems
        assert said[0].startswith(f"{rel}: its bytes differ from what its rollout"), problems
    assert f"{_rel(run, 'task-4', 'seed', 0)}: unreadable (Extra data" in " ".join(problems)
    assert f"{_rel(run, 'task-0', 'seed', 0)}: unreadable ('split'); " in " ".join(problems)
    assert any(p.startswith(f"{_rel(run, 'task-2', 'seed', 0)}: unreadable") for p in problems)


def test_verify_finds_a_rollout_paid_twice_unless_it_was_moved_aside_in_between(
    run: RunDir, val_rollout
) -> None:
    run.rollouts.record_rollout(val_rollout("seed", "task-0", 0, 0.0))  # a second valid event, same file
    twice = "val task-0 seed t0: paid 2 times (rollout events seq "
    assert [p for p in audit(RunDir(run.root)) if ": paid" in p][0].startswith(twice)
    run.log.append_event("rollout_quarantined", file=f"{_rel(run, 'task-1', 'seed', 0)}", moved_to="x")
    run.rollouts.record_rollout(val_rollout("seed", "task-1", 0, 0.5))  # paid again after the move: expected
    problems = audit(RunDir(run.root))
    (paid,) = [p for p in problems if ": paid" in p]
    assert paid.startswith(twice) and paid.endswith("with no quarantine or vanish of its file between")
    # paid again after an infra error (not a measurement): one valid event, so not paid twice
    run.rollouts.record_rollout(val_rollout("cand", "task-3", 1, 0.5))
    assert [p for p in audit(RunDir(run.root)) if ": paid" in p] == [paid]


def test_verify_and_the_decisions_guard_find_the_same_double_payments(run: RunDir, val_rollout) -> None:
    """`capevolve verify` (audit) and the check before a decision (paid_by.untrusted) flag a double
    payment by one rule (issue 40): a key paid twice, then moved aside and paid again, was refused
    by the check but passed by verify, which counted only the events since the file's last move."""

    def doubles() -> tuple[list[str], list[str]]:
        rundir = RunDir(run.root)
        said = [p for p in audit(rundir) if ": paid" in p]
        return said, [p for p in untrusted(rundir.log.of_kinds(*KINDS), rundir.rollout_file) if ": paid" in p]

    assert doubles() == ([], [])  # a run without a double payment
    run.rollouts.record_rollout(val_rollout("seed", "task-0", 0, 0.0))  # paid twice, nothing moved between
    run.log.append_event("rollout_quarantined", file=f"{_rel(run, 'task-0', 'seed', 0)}", moved_to="x")
    run.rollouts.record_rollout(val_rollout("seed", "task-0", 0, 0.5))  # after the move: expected
    said, refused = doubles()
    assert said == refused and len(said) == 1, (said, refused)
    assert said[0].startswith("val task-0 seed t0: paid 2 times (rollout events seq "), said


def test_a_resume_skips_comparing_outcomes_only_while_its_truth_is_the_checkpointed_index(
    run: RunDir, val_rollout
) -> None:
    """A resume whose ledger was built from the index's rows (their digest the log's checkpoint's)
    checks files by size and mtime alone; an index row edited since (its file untouched) breaks the
    digest, so the outcomes are compared again and the row is read from its file, never believed."""
    run.flush()  # a session's end: the outcomes' digest is logged
    run.index.close()
    resumed = RunDir(run.root)
    rows = {r.key: r.reward for r in resumed.rollouts.indexed_rollouts("val")}
    truth = resumed.rollouts._truth()
    assert resumed.rollouts.ledger.mirrors(truth, resumed.index.every())  # the shortcut is taken
    assert rows[("val", "task-0", "seed", 0)] == 0.0 and not resumed.notices
    resumed.index.close()
    db = sqlite3.connect(run.index.path)
    db.execute("UPDATE rollouts SET reward = 1.0 WHERE tag = 'seed' AND task_id = 'task-0' AND trial = 0")
    db.commit()
    db.close()
    edited = RunDir(run.root)
    rows = {r.key: r.reward for r in edited.rollouts.indexed_rollouts("val")}
    assert rows[("val", "task-0", "seed", 0)] == 0.0  # the file's reward (and the log's), not the row's
    assert not edited.rollouts.ledger.mirrors(edited.rollouts._truth(), edited.index.every())
    # a rollout logged after the checkpoint: the truth is no longer the rows it was built from
    resumed.rollouts.record_rollout(val_rollout("seed", "task-9", 0, 1.0))
    resumed.rollouts.indexed_rollouts("val")
    assert not resumed.rollouts.ledger.mirrors(resumed.rollouts._truth(), resumed.index.every())
