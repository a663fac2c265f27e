"""The rows a decision reads are held to the log's own rollout events (``first_outcomes``): each row's
outcome must be one an event of its key logged, whatever checkpoint the index or the sealed summary was
trusted on; an honest row (a redraw's, an infra error's) passes and is read at its first valid outcome."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_capevolve._store.readers.evidence import UnloggedRows, first_outcomes, index_records
from pytest_capevolve._store.rundir import RunDir


def _run(tmp_path, val_rollout) -> RunDir:
    """task-0 a fail, task-1 an infra error (owed, never paid valid), task-2 a pass whose file was
    quarantined and paid again as a fail (a redraw: its first valid outcome stands)."""
    run = RunDir(tmp_path / "run")
    run.rollouts.record_rollout(val_rollout("noop", "task-0", 0, 0.0))
    run.rollouts.record_rollout(val_rollout("noop", "task-1", 0, None, infra="API down"))
    run.rollouts.record_rollout(val_rollout("noop", "task-2", 0, 1.0))
    run.rollouts.quarantine(run.rollout_path("val", "task-2", "noop", 0), "damaged on purpose")
    run.rollouts.record_rollout(val_rollout("noop", "task-2", 0, 0.0))
    run.flush()
    return run


def test_honest_rows_pass_each_at_its_first_valid_outcome(tmp_path, val_rollout) -> None:
    run = _run(tmp_path, val_rollout)
    by_tag = index_records(run.rollouts.indexed_rollouts("val"))
    held, repaid = first_outcomes(run, by_tag, 1.0)
    arm = held["noop"]
    assert [arm[(f"task-{i}", 0)].reward for i in range(3)] == [0.0, None, 1.0]
    assert arm[("task-1", 0)].infra_error == "API down"
    assert repaid == {"noop": 1}


@pytest.mark.attack(
    "record",
    attack=(
        "unconfined: the index row of a rollout whose only event is an infra error (owed, never paid "
        "valid) made a pass, with a checkpoint forged to match (no row of a paid key changed, so no "
        "first valid outcome held it): the decision read the pass; or a valid row made an infra error, "
        "or a row for a key no event holds"
    ),
    outcome=(
        "refused (exit 11 in a session): a row whose outcome no rollout event of its key logged is "
        "named, and nothing is decided"
    ),
)
@pytest.mark.parametrize(
    "task, forged, said",
    [
        (
            "task-1",
            {"reward": 1.0, "infra_error": None, "passed": True},
            "its rollout event logged reward None",
        ),
        ("task-0", {"reward": None, "infra_error": "API down", "passed": None}, "infra error 'API down'"),
        ("task-9", {"reward": 1.0, "passed": True}, "no rollout event records it"),
    ],
)
def test_a_row_no_event_of_its_key_logged_is_refused(tmp_path, val_rollout, task, forged, said) -> None:
    run = _run(tmp_path, val_rollout)
    by_tag = index_records(run.rollouts.indexed_rollouts("val"))
    record = by_tag["noop"].get((task, 0)) or replace(by_tag["noop"][("task-0", 0)], task_id=task)
    by_tag["noop"][(task, 0)] = replace(record, **forged)
    with pytest.raises(UnloggedRows) as refused:
        first_outcomes(run, by_tag, 1.0)
    message = str(refused.value)
    assert f"val {task} noop t0 says" in message and said in message
    assert "1 rollout row(s)" in message and "delete index.sqlite and rollouts.summary.json" in message
