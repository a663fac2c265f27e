"""``state.json`` checked from the leaving session's checkpoint, not from the log's start.

A session that leaves logs ``state.json``'s tally in its ``outcomes_checked`` event (and a
``session_left`` line after it, so the chain covers it); the next process folds only the log
after it. Only a checkpoint the chain covers counts: edited, copied to later in the log, or
tacked on as the last line, it is refused or passed over — never the reason an edited state is
believed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pytest_capevolve._store.decisions.state_tally import StateTally
from pytest_capevolve._store.files import RunDirError
from pytest_capevolve._store.log.outcome_ledger import digest_of
from pytest_capevolve._store.rollouts.record import RolloutRecord
from pytest_capevolve._store.rundir import RunDir


@pytest.fixture
def run(tmp_path: Path, val_rollout) -> RunDir:
    """30 val rollouts paid and a reject booked in the log, then left as a session leaves."""
    rundir = RunDir(tmp_path / "run")
    for t in range(10):
        for k in range(3):
            record = val_rollout("seed", f"task-{t}", k, 0.5)
            rundir.rollouts.record_rollout(
                RolloutRecord.from_json({**record.to_json(), "cost_usd": 0.01 * (t + 1)})
            )
    rundir.log.append_event("decision", tag="cand", decision="reject", optimizer_usd=0.25)
    rundir.state.update_state(
        lambda s: s.update(iterations=1, stall=1, spent={**s["spent"], "optimizer_usd": 0.25})
    )
    rundir.rollouts.indexed_rollouts("val")  # a session reads its evidence: the ledger is built
    rundir.flush()
    rundir.close_log()
    return rundir


def _lines(run: RunDir) -> list[str]:
    return run.events_path.read_text(encoding="utf-8").splitlines()


def _folds(monkeypatch) -> list[int]:
    folded: list[int] = []
    fold = StateTally.fold

    def counting(self, event):
        folded.append(int(event.get("seq", 0)))
        return fold(self, event)

    monkeypatch.setattr(StateTally, "fold", counting)
    return folded


def _edit_state(run: RunDir, **spent) -> None:
    state = json.loads(run.state_path.read_text())
    state["spent"].update(spent)
    run.state_path.write_text(json.dumps(state))


def test_the_leaving_checkpoint_carries_the_tally_and_the_next_reader_folds_only_after_it(
    run: RunDir, monkeypatch
) -> None:
    events = [json.loads(line) for line in _lines(run)]
    assert [e["kind"] for e in events[-2:]] == ["outcomes_checked", "session_left"]
    held = events[-2]["state"]
    assert (held["metric_calls"], held["iterations"], held["stall"], held["optimizer_usd"]) == (
        30,
        1,
        1,
        0.25,
    )
    folded = _folds(monkeypatch)
    fresh = RunDir(run.root)  # another process
    state = fresh.state.read_state()
    assert folded and min(folded) > events[-2]["upto"]  # not one rollout line folded again
    assert state["spent"]["metric_calls"] == 30 and state["spent"]["usd"] == pytest.approx(1.65)
    expected = fresh.state.replay_state()
    assert {k: state[k] for k in ("best_id", "iterations", "stall")} == {
        k: expected[k] for k in ("best_id", "iterations", "stall")
    }
    # what is logged after the checkpoint still counts, and an edit of it is still refused
    fresh.rollouts.record_rollout(
        RolloutRecord.from_json({**_one(run).to_json(), "task_id": "late", "cost_usd": 1.0})
    )
    assert RunDir(run.root).state.read_state()["spent"]["metric_calls"] == 31
    fresh.flush()
    _edit_state(run, metric_calls=3)
    with pytest.raises(RunDirError, match="state.json was edited"):
        RunDir(run.root).state.read_state()


def _one(run: RunDir) -> RolloutRecord:
    return run.rollouts.indexed_rollouts("val")[0]


@pytest.mark.attack(
    "record",
    attack=(
        "the `state.json` tally a leaving session logs (so the next reader folds only the log after "
        "it) edited to 0 rollouts, with `state.json` to match"
    ),
    outcome="refused: the event's hash link breaks",
)
def test_an_edited_tally_is_refused_in_one_line(run: RunDir) -> None:
    """The checkpoint's tally set to 0 rollouts, state.json likewise (to get past
    ``max_metric_calls``): the line after the checkpoint no longer links to it."""
    lines = _lines(run)
    at = max(i for i, line in enumerate(lines) if '"kind": "outcomes_checked"' in line)
    event = json.loads(lines[at])
    event["state"].update(metric_calls=0, usd=0.0)
    lines[at] = json.dumps(event, sort_keys=True, ensure_ascii=False)
    run.events_path.write_text("\n".join(lines) + "\n")
    _edit_state(run, metric_calls=0, usd=0.0)
    with pytest.raises(RunDirError, match="outcomes_checked event seq .* edited"):
        RunDir(run.root).state.read_state()


def _append_chained(run: RunDir, event: dict) -> None:
    """A line appended by hand that chains to the log's end (as a shell can)."""
    last = _lines(run)[-1]
    event = {**event, "seq": json.loads(last)["seq"] + 1, "prev": hashlib.sha256(last.encode()).hexdigest()}
    with run.events_path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(event, sort_keys=True, ensure_ascii=False) + "\n")


@pytest.mark.attack(
    "record",
    attack=(
        "a forged tally appended by hand, chained to the log's end: a stale copy of the real one, or "
        "one made for the last line"
    ),
    outcome=(
        "prevented: only a checkpoint the chain covers where it says it is counts; the edited "
        "`state.json` is refused"
    ),
)
@pytest.mark.parametrize("where", ["stale copy", "last line"])
def test_a_forged_tally_in_a_later_appended_event_is_never_used(run: RunDir, where: str) -> None:
    """A checkpoint with a tally of 0 appended by hand, chained to the end: copied from the
    real one (it says it is current to a point it is not at), or made for the end of the log
    (no line after it holds it). Neither is folded from: the edited state.json is refused."""
    real = json.loads(next(line for line in reversed(_lines(run)) if '"kind": "outcomes_checked"' in line))
    forged = {k: v for k, v in real.items() if k not in ("seq", "prev")}
    forged["state"] = {**real["state"], "metric_calls": 0, "usd": 0.0}
    if where == "last line":
        forged["offset"] = run.events_path.stat().st_size
        forged["upto"] = json.loads(_lines(run)[-1])["seq"]
    _append_chained(run, forged)
    _edit_state(run, metric_calls=0, usd=0.0)
    state = json.loads(run.state_path.read_text())
    state["spent_through"] = {
        "offset": run.events_path.stat().st_size,
        "seq": json.loads(_lines(run)[-1])["seq"],
    }
    run.state_path.write_text(json.dumps(state))
    with pytest.raises(RunDirError, match="spent.metric_calls is 0, but the event log adds up to 30"):
        RunDir(run.root).state.read_state()


def test_a_state_current_to_before_the_checkpoint_is_checked_against_the_whole_log(
    run: RunDir, tmp_path: Path
) -> None:
    """A ``state.json`` kept from before the last session (a view of an earlier point of the
    log): the checkpoint's tally cannot answer for that point, so the whole log is folded —
    an honest old view is read, an edited one refused."""
    older = json.loads(run.state_path.read_text())
    run.rollouts.record_rollout(
        RolloutRecord.from_json({**_one(run).to_json(), "task_id": "late", "cost_usd": 1.0})
    )
    run.rollouts.indexed_rollouts("val")
    run.flush()
    checkpoints = [json.loads(line) for line in _lines(run) if '"kind": "outcomes_checked"' in line]
    assert checkpoints[-1]["upto"] > older["spent_through"]["seq"]
    run.state_path.write_text(json.dumps(older))
    assert RunDir(run.root).state.read_state()["spent"]["metric_calls"] == 31  # the later one counted
    older["stall"] = 0
    run.state_path.write_text(json.dumps(older))
    with pytest.raises(RunDirError, match="stall is 0, but the event log adds up to 1"):
        RunDir(run.root).state.read_state()


@pytest.mark.parametrize("count", [0, 1, 4095, 4096, 4097, 9000])
def test_the_outcomes_digest_is_the_sha256_of_the_lists_repr_hashed_a_block_at_a_time(count: int) -> None:
    """The digest a leaving session logs is hashed a block of outcomes at a time (never the whole
    repr: 5 MB at 60,000); it stays the sha256 of the list's repr, so a checkpoint an older
    version logged still lets the index stand for the log."""
    items = [
        (
            ("val", "seed", f"t{i}", i % 3),
            (None if i % 5 == 0 else i / 7, "boom" if i % 11 == 0 else None, -0.0),
        )
        for i in range(count)
    ]
    assert digest_of(iter(items)) == hashlib.sha256(repr(items).encode("utf-8")).hexdigest()
