"""``events_digest.json``: the log less its rollout lines, caught up from where it stopped and
rebuilt when it is damaged or the log no longer continues from it — always what the log says.
And the tail it is read from: only complete lines, a ``view`` that holds a part of each event (or
nothing) with the same offsets and seqs, and the readers that fold rollouts into counts or sums
agreeing with the whole log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_capevolve._show.dashboard.model import folded, read_log
from pytest_capevolve._store.log.log_views import DIGEST_NAME, digest
from pytest_capevolve._store.rundir import RunDir
from pytest_capevolve._store.sessions.order_secret import OrderSecret


def expected(rundir: RunDir) -> tuple[list[dict], dict[str, int]]:
    events = rundir.log.events()
    counts: dict[str, int] = {}
    for e in events:
        if e["kind"] == "rollout":
            counts[e["split"]] = counts.get(e["split"], 0) + 1
    return [e for e in events if e["kind"] != "rollout"], counts


@pytest.fixture
def run(tmp_path: Path, val_rollout, monkeypatch) -> RunDir:
    # the run's secret names its rollout files; logged as a line of its own, it would move every line
    # these tests read by place: held here without its line
    monkeypatch.setattr(OrderSecret, "read", lambda self: bytes(32))
    rundir = RunDir(tmp_path / "run")
    rundir.root.mkdir()
    rundir.log.append_event("session_started", split="val")
    for k in range(3):
        rundir.rollouts.record_rollout(val_rollout("seed", "t1", k, 1.0))
    # an event that is not a rollout (a best_changed moves the best only after a booked accept:
    # issue 24, red-team finding 6; this one names the best it has)
    rundir.log.append_event("best_changed", best_id="seed", previous="seed")
    return rundir


def test_the_digest_is_the_log_less_its_rollouts_and_catches_up(run: RunDir, val_rollout) -> None:
    assert digest(run) == expected(run)
    through = json.loads((run.root / DIGEST_NAME).read_text())["through"]
    run.rollouts.record_rollout(val_rollout("cand", "t1", 0, 0.0))
    run.log.append_event("null_gated", tag="seed-null1", decision="reject", alpha=0.05)
    assert digest(RunDir(run.root)) == expected(run)  # another process, from the file
    assert json.loads((run.root / DIGEST_NAME).read_text())["through"][1] == through[1] + 2
    assert digest(run)[1] == {"val": 4}


@pytest.mark.parametrize("damage", ["garbage", "rewritten log"])
def test_a_damaged_digest_or_a_rewritten_log_is_read_from_the_whole_log(run: RunDir, damage: str) -> None:
    digest(run)
    if damage == "garbage":
        (run.root / DIGEST_NAME).write_text("{not json")
    else:  # a log that no longer continues where the digest stopped: another run's, shorter
        other = RunDir(run.root.parent / "other")
        other.root.mkdir()
        other.log.append_event("session_started", split="train")
        run.events_path.write_bytes(other.events_path.read_bytes())
        run.log._event_tail = None
    assert digest(run) == expected(run)


def test_a_line_still_being_written_is_left_for_the_next_read(run: RunDir) -> None:
    events, offset, seq = run.log.events_after(0, 0)
    assert [e["seq"] for e in events] == list(range(1, seq + 1)) and offset == run.events_path.stat().st_size
    whole = run.events_path.read_bytes()
    torn = b'{"kind": "session_finished", "seq": %d' % (seq + 1)
    run.events_path.write_bytes(whole + torn)
    assert run.log.events_after(0, 0)[1:] == (offset, seq)  # the torn line is not an event yet
    run.events_path.write_bytes(whole + torn + b"}\n")
    tail, end, last = run.log.events_after(offset, seq)
    assert [e["kind"] for e in tail] == ["session_finished"] and last == seq + 1
    assert end == run.events_path.stat().st_size


def test_a_view_changes_what_is_held_not_where_the_read_ends(run: RunDir) -> None:
    whole = run.log.events_after(0, 0)
    kinds = run.log.events_after(0, 0, lambda event: event["kind"])
    nothing = run.log.events_after(0, 0, lambda event: None)
    assert kinds[0] == [e["kind"] for e in whole[0]] and kinds[1:] == whole[1:]
    assert nothing == ([], *whole[1:])
    run.events_path.write_bytes(run.events_path.read_bytes().replace(b'"seq": 3', b'"seq": 9'))
    assert run.log.events_after(0, 0, lambda event: None) is None  # a broken chain is still refused


def test_spend_folded_as_read_equals_the_whole_log(run: RunDir, val_rollout) -> None:
    before = run.state.read_state()["spent"]
    for k in range(3, 8):
        run.rollouts.record_rollout(val_rollout("seed", "t2", k, 1.0))
    spent = RunDir(run.root).state.read_state()["spent"]  # another process: caught up from state.json
    assert (
        spent["metric_calls"]
        == before["metric_calls"] + 5
        == run.state.replay_state()["spent"]["metric_calls"]
    )
    assert spent["usd"] == pytest.approx(run.state.replay_state()["spent"]["usd"])


def test_the_dashboard_folds_each_rollout_as_read(run: RunDir) -> None:
    log = read_log(run)
    whole = run.log.events()
    assert [e["seq"] for e in log.events] == [e["seq"] for e in whole if e["kind"] != "rollout"]
    assert log.numbers == [i for i, e in enumerate(whole) if e["kind"] != "rollout"]  # places kept
    assert log.count == len(whole) and log.first_val_rollout == {"seed": 1}
    assert (log.events, log.numbers, log.first_val_rollout) == (
        (other := folded(whole)).events,
        other.numbers,
        other.first_val_rollout,
    )
