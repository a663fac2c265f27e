"""``events_digest.json``: the log less its rollout lines, caught up from where it stopped and
rebuilt when it is damaged or the log no longer continues from it — always what the log says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_capevolve.store.event_digest import DIGEST_NAME, digest
from pytest_capevolve.store.rundir import RunDir


def expected(rundir: RunDir) -> tuple[list[dict], dict[str, int]]:
    events = rundir.events()
    counts: dict[str, int] = {}
    for e in events:
        if e["kind"] == "rollout":
            counts[e["split"]] = counts.get(e["split"], 0) + 1
    return [e for e in events if e["kind"] != "rollout"], counts


@pytest.fixture
def run(tmp_path: Path, val_rollout) -> RunDir:
    rundir = RunDir(tmp_path / "run")
    rundir.root.mkdir()
    rundir.append_event("session_started", split="val")
    for k in range(3):
        rundir.record_rollout(val_rollout("seed", "t1", k, 1.0))
    rundir.append_event("best_changed", best_id="cand", previous="seed")
    return rundir


def test_the_digest_is_the_log_less_its_rollouts_and_catches_up(run: RunDir, val_rollout) -> None:
    assert digest(run) == expected(run)
    through = json.loads((run.root / DIGEST_NAME).read_text())["through"]
    run.record_rollout(val_rollout("cand", "t1", 0, 0.0))
    run.append_event("null_gated", tag="seed-null1", decision="reject", alpha=0.05)
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
        other.append_event("session_started", split="train")
        run.events_path.write_bytes(other.events_path.read_bytes())
        run._event_tail = None
    assert digest(run) == expected(run)
