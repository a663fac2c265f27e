"""The sealed summary alone: what it serves, and each mismatch that makes it serve nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pytest_capevolve._store.log.sealed_summary import SUMMARY_NAME, SealedSummary
from pytest_capevolve._store.rundir import RunDir

ROWS = [
    (
        "val",
        "seed",
        f"t{i}",
        k,
        reward,
        1,
        infra,
        0.0,
        3,
        0.5,
        7,
        "sha256:aa",
        "r1",
        f"t{i}__seed__t{k}.json",
        9,
        1,
    )
    for i, (reward, infra) in enumerate([(1.0, None), (-0.0, None), (None, "timeout"), (0.5, None)])
    for k in range(2)
]


def _written(tmp_path: Path) -> RunDir:
    run = RunDir(tmp_path / "run")
    (run.root / "rollouts" / "val").mkdir(parents=True)
    run.log.append_event("session_left", checkpoint=0)
    with run.lock():
        (summary := SealedSummary(run.root, run.log)).write(ROWS, "v1", summary.stamps())
    return run


def _serves(run: RunDir) -> tuple[str, list] | None:
    return SealedSummary(run.root, run.log).rows()


def test_it_serves_every_row_as_written_with_its_version(tmp_path: Path) -> None:
    run = _written(tmp_path)
    served = _serves(run)
    assert served is not None and served[0] == "v1" and served[1] == ROWS
    negative = served[1][2][4]
    assert negative == 0.0 and math.copysign(1.0, negative) < 0  # -0.0 kept: a digest hashes its repr
    run.log.append_event("session_started", candidate_code="x", owed=0)  # a quiet line after it
    assert _serves(run) is not None


def test_a_rollout_line_after_it_or_its_bytes_changed_serve_nothing(tmp_path: Path) -> None:
    """(A split folder that moved: ``tests/e2e/test_attacks_sealed_summary.py``, where a session
    lies between the summary and the edit, so the folder's ctime is a later clock tick.)"""
    run = _written(tmp_path)
    summary = SealedSummary(run.root, run.log)
    assert summary.rows() is not None
    run.log.append_event("rollout_vanished", files=["rollouts/val/t0__seed__t0.json"])
    assert summary.rows() is None and _serves(run) is None
    assert summary.rows() is None  # and stays so in this process

    run = _written(tmp_path / "c")
    path = run.root / SUMMARY_NAME
    found = json.loads(path.read_text())
    found["rows_version"] = "v2"
    path.write_text(json.dumps(found, separators=(",", ":")))
    assert _serves(run) is None  # not the sha256 its line records

    run = _written(tmp_path / "d")
    (run.root / SUMMARY_NAME).unlink()
    assert _serves(run) is None


def test_no_line_after_it_or_no_line_at_all_serve_nothing(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    (run.root / "rollouts" / "val").mkdir(parents=True)
    run.log.append_event("session_left", checkpoint=0)
    assert _serves(run) is None  # never written
    with run.lock():
        (summary := SealedSummary(run.root, run.log)).write(ROWS, "v1", summary.stamps())
    lines = (run.root / "events.jsonl").read_text().splitlines(keepends=True)
    (run.root / "events.jsonl").write_text("".join(lines[:-1]))  # the line recording its hash, gone
    assert _serves(run) is None
