"""The event log's writer (store/events.py): its descriptor kept open between appends, and the
events it appended held so that readers catching up on them (the spend in state.json, the
rollout index) are not charged their decoding — always answering what the file says."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_capevolve._store.files import RunDirError, RunLock
from pytest_capevolve._store.log import event_chain
from pytest_capevolve._store.log import events as events_module
from pytest_capevolve._store.log.event_chain import verify_events
from pytest_capevolve._store.rundir import RunDir
from pytest_capevolve._store.sessions.order_secret import OrderSecret


@pytest.fixture
def run(tmp_path: Path, val_rollout, monkeypatch) -> RunDir:
    # the run's secret names its rollout files; logged as a line of its own, it would move every line
    # these tests read by place: held here without its line
    monkeypatch.setattr(OrderSecret, "read", lambda self: bytes(32))
    rundir = RunDir(tmp_path / "run")
    rundir.root.mkdir()
    rundir.log.append_event("session_started", split="val", tags=("seed", "cand"))  # a tuple: a list on file
    for k in range(5):
        rundir.rollouts.record_rollout(val_rollout("seed", "t1", k, 1.0))
    return rundir


def from_file(run: RunDir, offset: int, seq: int, view=None):
    """What a process that appended nothing reads: the file, decoded."""
    return RunDir(run.root).log.events_after(offset, seq, view)


def test_the_events_held_read_back_as_the_file_says(run: RunDir, monkeypatch) -> None:
    whole = run.log.events_after(0, 0)
    assert whole == from_file(run, 0, 0) and len(whole[0]) == 6
    assert [list(e) for e in whole[0]] == [list(e) for e in from_file(run, 0, 0)[0]]  # keys in file order
    assert whole[0][0]["tags"] == ["seed", "cand"]
    after_first = len(run.events_path.read_bytes().split(b"\n")[0]) + 1
    assert run.log.events_after(after_first, 1) == from_file(run, after_first, 1)
    kinds = run.log.events_after(after_first, 1, lambda event: event["kind"])
    assert kinds == (["rollout"] * 5, *whole[1:])

    decoded: list[bytes] = []
    monkeypatch.setattr(events_module, "json", SimpleNamespace(loads=lambda line: decoded.append(line)))
    monkeypatch.setattr(event_chain, "json", SimpleNamespace(loads=lambda line: decoded.append(line)))
    monkeypatch.setattr(events_module, "loads_bytes", lambda line: decoded.append(line))
    assert run.log.events_after(after_first, 1) == (whole[0][1:], *whole[1:])
    assert run.log.events_after(0, 0, lambda event: None) == ([], *whole[1:])
    assert decoded == []  # served from what was appended, not decoded again
    handed = run.log.events_after(0, 0)[0][0]
    handed["kind"] = "changed"  # what a reader is handed is its own
    assert run.log.events_after(0, 0)[0][0]["kind"] == "session_started"


def test_a_line_edited_by_hand_to_the_same_length_is_read_from_the_file(run: RunDir) -> None:
    text = run.events_path.read_bytes()
    run.events_path.write_bytes(text.replace(b'"seq": 3', b'"seq": 9'))  # same size, same file
    assert run.log.events_after(0, 0) is None  # the broken chain is seen, as by any reader
    run.events_path.write_bytes(text.replace(b'"reward": 1.0', b'"reward": 0.0', 1))
    events = run.log.events_after(0, 0)
    assert events == from_file(run, 0, 0) and events[0][1]["reward"] == 0.0


def test_another_writer_in_between_is_read_from_the_file(run: RunDir, val_rollout) -> None:
    other = RunDir(run.root)
    other.rollouts.record_rollout(val_rollout("cand", "t1", 0, 0.0))
    run.rollouts.record_rollout(val_rollout("cand", "t1", 1, 0.0))
    assert run.log.events_after(0, 0) == from_file(run, 0, 0) and len(run.log.events_after(0, 0)[0]) == 8
    assert verify_events(run.events_path) == (8, None)


def test_past_what_is_held_the_older_events_are_read_from_the_file(
    run: RunDir, val_rollout, monkeypatch
) -> None:
    monkeypatch.setattr(events_module, "APPENDED_HELD", 4)
    monkeypatch.setattr(events_module, "APPENDED_DROPPED", 2)
    for k in range(5, 15):
        run.rollouts.record_rollout(val_rollout("seed", "t1", k, 0.5))
    assert run.log._appended is not None and 4 <= len(run.log._appended.events) <= 6
    held = len(run.log._appended.events)
    decoded: list[bytes] = []
    monkeypatch.setattr(
        events_module, "json", SimpleNamespace(loads=lambda line: decoded.append(line) or json.loads(line))
    )
    monkeypatch.setattr(
        event_chain, "json", SimpleNamespace(loads=lambda line: decoded.append(line) or json.loads(line))
    )
    monkeypatch.setattr(events_module, "loads_bytes", lambda line: decoded.append(line) or json.loads(line))
    whole = run.log.events_after(0, 0)
    assert len(decoded) == 16 - held  # the file read up to the lines held, those taken as held
    monkeypatch.undo()
    assert whole == from_file(run, 0, 0) and len(whole[0]) == 16
    for back in (3, 7):  # within what is held, and before it
        seq = whole[0][-back - 1]["seq"]
        offset = sum(len(line) + 1 for line in run.events_path.read_bytes().split(b"\n")[:seq])
        assert (
            run.log.events_after(offset, seq) == from_file(run, offset, seq)
            and len(run.log.events_after(offset, seq)[0]) == back
        )


def test_the_descriptor_follows_the_file_its_path_names(run: RunDir) -> None:
    """Kept open between appends; a log replaced (a repair) or removed is opened afresh, so no
    line is written to a file the run dir no longer has."""
    kept = run.log._appender
    assert kept is not None
    run.log.append_event("mechanism", text="one")
    assert run.log._appender is kept  # the same descriptor: not opened again
    copy = run.events_path.with_name("copy.jsonl")
    copy.write_bytes(run.events_path.read_bytes())
    os.replace(copy, run.events_path)  # another file at the same path
    run.log.append_event("mechanism", text="two")
    assert json.loads(run.events_path.read_text().splitlines()[-1])["text"] == "two"
    assert verify_events(run.events_path) == (len(run.events_path.read_text().splitlines()), None)
    run.events_path.unlink()
    run.log._event_tail = None
    run.log.append_event("mechanism", text="three")
    assert [json.loads(line)["text"] for line in run.events_path.read_text().splitlines()] == ["three"]
    run.log.close_log()
    assert run.log._appender is None
    run.log.append_event("mechanism", text="four")
    assert len(run.events_path.read_text().splitlines()) == 2


def locked_elsewhere(path: Path) -> bool:
    """Does another holder have ``path`` locked? (A second open file description in this
    process conflicts with the first, as another process's would.)"""
    fd = os.open(path, os.O_WRONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def test_the_run_lock_keeps_its_descriptor_and_locks_the_file_its_path_names(tmp_path: Path) -> None:
    root = tmp_path / "run"
    lock = RunLock(root)
    with lock():
        with lock():  # re-entrant
            assert locked_elsewhere(root / ".lock")
        assert locked_elsewhere(root / ".lock")
    assert not locked_elsewhere(root / ".lock")
    kept = lock._kept
    with lock():
        assert lock._kept is kept  # not opened again
    shutil.rmtree(root)  # the run dir removed and made again: a new .lock
    root.mkdir()
    (root / ".lock").touch()
    with lock():
        assert locked_elsewhere(root / ".lock")  # the new file, not the removed one
    lock.close()
    assert lock._kept is None and not locked_elsewhere(root / ".lock")


def test_every_line_is_the_key_sorted_json_of_its_event(run: RunDir) -> None:
    """A flat event (a rollout's) is sorted once and encoded as it is; any other by the sorting
    encoder: either way the line is what ``json.dumps(..., sort_keys=True)`` writes."""
    run.log.append_event("state_rebuilt", spent={"usd": 1.5, "metric_calls": 2}, problem="ünïcode")
    lines = run.events_path.read_text(encoding="utf-8").splitlines()
    assert [json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False) for line in lines] == lines
    assert json.loads(lines[-1])["spent"] == {"metric_calls": 2, "usd": 1.5}
    assert run.log.events_after(0, 0) == from_file(run, 0, 0)


def test_the_events_a_chain_check_parsed_are_reused_once_and_only_while_the_file_is_unchanged(
    run: RunDir,
) -> None:
    """``capevolve verify`` parses the log once: the audit takes the events the chain's check
    read — the same as reading them again — but never after the file changed, nor twice."""
    assert verify_events(run.events_path)[1] is None
    assert event_chain.verified_events(run.events_path) == RunDir(run.root).log.events()
    assert event_chain.verified_events(run.events_path) is None  # taken once
    assert verify_events(run.events_path)[1] is None
    run.log.append_event("mechanism", text="appended after the check")
    assert event_chain.verified_events(run.events_path) is None  # changed since: read it again


def test_of_kinds_read_a_block_at_a_time_finds_what_one_read_of_the_whole_log_finds(
    run: RunDir, monkeypatch
) -> None:
    """The log is searched a block at a time (never held whole: 18 MB at 60,000 rollouts); every
    block size, down to lines cut anywhere, finds the same events, and a broken hash link is
    refused wherever the block boundary falls."""
    run.log.append_event("verdict", tag="a", basis='"kind": "decision" in a value is no decision')
    run.log.append_event("decision", tag="a", decision="reject")
    run.log.append_event("session_finished", paid=5)
    whole = RunDir(run.root).log.of_kinds("decision", "verdict", "session_started")
    assert [e["kind"] for e in whole] == ["session_started", "verdict", "decision"]
    size = run.log.events_path.stat().st_size
    for block in (1, 7, 64, 333, size - 1, size, size + 1):
        monkeypatch.setattr(events_module, "_SCAN_BLOCK", block)
        assert RunDir(run.root).log.of_kinds("decision", "verdict", "session_started") == whole, block
    text = run.log.events_path.read_text()
    run.log.events_path.write_text(text.replace('"decision": "reject"', '"decision": "accept"'))
    for block in (1, 64, size):
        monkeypatch.setattr(events_module, "_SCAN_BLOCK", block)
        with pytest.raises(RunDirError, match="the decision event seq .* was edited after it was written"):
            RunDir(run.root).log.of_kinds("decision")


@pytest.mark.parametrize("kinds", [("decision",), ("decision", "rollout")])
def test_of_kinds_leaves_a_line_being_written_and_refuses_a_damaged_one_with_the_way_on(
    run: RunDir, kinds: tuple[str, ...]
) -> None:
    """A last line without its newline is still being written (or torn by a crash): not an event
    yet, as ``events_after`` reads it. A whole line that is not JSON is damage, refused as
    ``events()`` refuses it, naming the repair, never a bare JSONDecodeError."""
    run.log.append_event("decision", tag="a", decision="reject")
    before = RunDir(run.root).log.of_kinds(*kinds)
    whole = run.log.events_path.read_bytes()
    run.log.events_path.write_bytes(whole + b'{"kind": "decision", "seq": 99, "tag": "b", "deci')
    assert RunDir(run.root).log.of_kinds(*kinds) == before
    run.log.events_path.write_bytes(whole + b'{"kind": "decision", "seq": 99, "tag": "b", "deci\n')
    with pytest.raises(RunDirError, match=r"a line is not an event .*capevolve verify --repair"):
        RunDir(run.root).log.of_kinds(*kinds)


def test_of_kinds_reads_the_log_once_for_every_kind_but_rollout(run: RunDir, monkeypatch) -> None:
    """Kinds other than ``rollout`` come from one pass over the log, kept while it is unchanged:
    each answers what a search for its own bytes finds (the path ``rollout`` takes), and an
    edited line is refused to a reader of its kind only, as before."""
    run.log.append_event("rollout", tag="a", trial=0, reward=1.0, infra_error={"kind": "decision"})
    run.log.append_event("verdict", tag="a", basis='"kind": "decision" in a value is no decision')
    run.log.append_event("decision", tag="a", decision="reject")
    run.log.append_event("session_finished", paid=1)
    log = RunDir(run.root).log
    passes = []
    scan = log._scan
    monkeypatch.setattr(log, "_scan", lambda *args: passes.append(args) or scan(*args))
    for kind in ("decision", "verdict", "session_finished", "session_started"):
        alone = [e for e in RunDir(run.root).log.of_kinds(kind, "rollout") if e["kind"] == kind]
        assert log.of_kinds(kind) == alone and alone, kind
    assert len(passes) == 1
    assert log.of_kinds("rollout")[-1]["infra_error"] == {"kind": "decision"}
    text = run.log.events_path.read_text()
    run.log.events_path.write_text(text.replace('"decision": "reject"', '"decision": "accept"'))
    assert [e["kind"] for e in log.of_kinds("verdict")] == ["verdict"]
    with pytest.raises(RunDirError, match="the decision event seq .* was edited after it was written"):
        log.of_kinds("decision")


def test_of_kinds_is_one_pass_per_process_kept_current_by_its_own_appends_only(
    run: RunDir, monkeypatch
) -> None:
    """Every reader of a log in a process shares one pass over it (a resume reads it through
    four), kept current by the lines the process appends itself; a log edited meanwhile (its
    size kept, a line appended after the edit) is read again, and the edit refused."""
    passes: list[object] = []
    scan = events_module.EventLog._scan
    monkeypatch.setattr(
        events_module.EventLog, "_scan", lambda self, *args: passes.append(args) or scan(self, *args)
    )
    run.log.append_event("decision", tag="a", decision="reject")
    first = RunDir(run.root).log.of_kinds("decision")
    assert RunDir(run.root).log.of_kinds("decision", "session_started") and len(passes) == 1
    run.log.append_event("decision", tag="b", decision="reject")
    run.rollouts.record_rollout(run.rollouts.indexed_rollouts("val")[0])
    seen = RunDir(run.root).log.of_kinds("decision")
    assert seen[:1] == first and seen[1]["tag"] == "b" and len(passes) == 1
    alone = [e for e in RunDir(run.root).log.of_kinds("decision", "rollout") if e["kind"] == "decision"]
    assert seen == alone == [e for e in RunDir(run.root).log.events() if e["kind"] == "decision"]
    text = run.log.events_path.read_text()
    run.log.events_path.write_text(text.replace('"tag": "a"', '"tag": "z"'))
    run.log.append_event("mechanism", text="appended after the edit")
    with pytest.raises(RunDirError, match="the decision event seq .* was edited after it was written"):
        RunDir(run.root).log.of_kinds("decision")
