"""Reading the log's tail line by line: only complete lines, a ``view`` that holds a part of each
event (or nothing) with the same offsets and seqs, and the readers that fold rollouts into counts
or sums agreeing with the whole log."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_capevolve.show.dashboard.model import ROLLOUT_FIELDS, _events, spend_series
from pytest_capevolve.store.rundir import RunDir


@pytest.fixture
def run(tmp_path: Path, val_rollout) -> RunDir:
    rundir = RunDir(tmp_path / "run")
    rundir.root.mkdir()
    rundir.append_event("session_started", split="val")
    for k in range(4):
        rundir.record_rollout(val_rollout("seed", "t1", k, float(k % 2)))
    rundir.append_event("decision", tag="cand", decision="reject", optimizer_usd=0.25)
    return rundir


def test_a_line_still_being_written_is_left_for_the_next_read(run: RunDir) -> None:
    events, offset, seq = run.events_after(0, 0)
    assert [e["seq"] for e in events] == list(range(1, seq + 1)) and offset == run.events_path.stat().st_size
    whole = run.events_path.read_bytes()
    torn = b'{"kind": "session_finished", "seq": %d' % (seq + 1)
    run.events_path.write_bytes(whole + torn)
    assert run.events_after(0, 0)[1:] == (offset, seq)  # the torn line is not an event yet
    run.events_path.write_bytes(whole + torn + b"}\n")
    tail, end, last = run.events_after(offset, seq)
    assert [e["kind"] for e in tail] == ["session_finished"] and last == seq + 1
    assert end == run.events_path.stat().st_size


def test_a_view_changes_what_is_held_not_where_the_read_ends(run: RunDir) -> None:
    whole = run.events_after(0, 0)
    kinds = run.events_after(0, 0, lambda event: event["kind"])
    nothing = run.events_after(0, 0, lambda event: None)
    assert kinds[0] == [e["kind"] for e in whole[0]] and kinds[1:] == whole[1:]
    assert nothing == ([], *whole[1:])
    run.events_path.write_bytes(run.events_path.read_bytes().replace(b'"seq": 3', b'"seq": 9'))
    assert run.events_after(0, 0, lambda event: None) is None  # a broken chain is still refused


def test_spend_folded_as_read_equals_the_whole_log(run: RunDir, val_rollout) -> None:
    before = run.read_state()["spent"]
    for k in range(4, 9):
        run.record_rollout(val_rollout("seed", "t2", k, 1.0))
    spent = RunDir(run.root).read_state()["spent"]  # another process: caught up from state.json
    assert spent["metric_calls"] == before["metric_calls"] + 5 == run.replay_state()["spent"]["metric_calls"]
    assert spent["usd"] == pytest.approx(run.replay_state()["spent"]["usd"])


def test_the_dashboard_holds_a_few_fields_of_each_rollout_and_draws_the_same_spend(run: RunDir) -> None:
    slim = _events(run)
    assert [e["seq"] for e in slim if e["kind"] != "rollout"] == [
        e["seq"] for e in run.events() if e["kind"] != "rollout"
    ]
    rollouts = [e for e in slim if e["kind"] == "rollout"]
    assert len(rollouts) == 4 and all(set(e) <= set(ROLLOUT_FIELDS) for e in rollouts)
    assert spend_series(slim) == spend_series(run.events())
