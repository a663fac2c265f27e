"""The sealed summary alone: what it serves, and each mismatch that makes it serve nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pytest_capevolve._store.log import sealed_summary
from pytest_capevolve._store.log.sealed_summary import SUMMARY_NAME, SealedSummary, _decoded, _encoded
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


@pytest.mark.parametrize(
    "column",
    [
        [1, 1.0, True, None] * 3,  # equal values of different types
        [0.0, -0.0] + [1.0] * 8,  # the zeros' signs
        [-0.0] * 8,
        [0.0, None, 1.0] * 4,  # an infra error's reward among scores
        [None, "timeout"] * 4,
        ["val"] * 8,  # one value
        [2**70] * 4 + [-(2**63), 2**63 - 1, 5],  # beyond 8 bytes
        [0.1 * i for i in range(9)],
        list(range(300)) * 4,  # more places than a byte holds
    ],
)
def test_every_value_reads_back_as_written_whatever_its_column_packs_to(column: list) -> None:
    """A column is packed (its distinct values and each row's place, or 8 bytes a number) and read back
    to the same types and bits: a digest of a row hashes its repr."""
    text = json.dumps(_encoded(column), allow_nan=False)
    assert [(type(v), repr(v)) for v in _decoded(json.loads(text))] == [(type(v), repr(v)) for v in column]


def test_a_summary_of_the_first_format_serves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written by the code before (plain columns, format 1), sealed by its line: it serves nothing here,
    and the next session that keeps the record seals one again (the full path once)."""
    with monkeypatch.context() as old:
        old.setattr(sealed_summary, "SUMMARY_FORMAT", 1)
        old.setattr(sealed_summary, "_encoded", lambda column: column)
        run = _written(tmp_path)
        assert _serves(run) is not None  # as the code before read it
    assert _serves(run) is None


MIXED = [
    (split, tag, f"t{i}", trial, *ROWS[0][4:13], f"{split}-{tag}-t{i}-{trial}.json", 9, 1)
    for i in range(3)
    for split in ("train", "val")
    for tag in ("seed", "cand")
    for trial in (0, 1, 1_000_001)  # 1_000_001: a trial of replicate block 1
]


def test_columns_asked_of_it_are_the_rows_it_serves_kept_by_split_tags_and_block(tmp_path: Path) -> None:
    """indexed_columns from the summary's own columns (no row made) keeps exactly the rows, in their
    order and with their values, that the rows path keeps: split, then tags, then the block's trials."""
    from pytest_capevolve._project.blocks import first_trial
    from pytest_capevolve._store.rollouts.index import _AT, Columns

    run = RunDir(tmp_path / "run")
    for split in ("train", "val"):
        (run.root / "rollouts" / split).mkdir(parents=True)
    run.log.append_event("session_left", checkpoint=0)
    with run.lock():
        (summary := SealedSummary(run.root, run.log)).write(MIXED, "v1", summary.stamps())
    files = RunDir(run.root).rollouts
    assert first_trial(1) <= 1_000_001 < first_trial(2)
    for split in ("train", "val"):
        for tags in (None, {"seed"}, {"seed", "cand"}, {"cand", "other"}, set()):
            for block in (0, 1, None):
                low, high = (0, 10**12) if block is None else (first_trial(block), first_trial(block + 1))
                kept = [
                    row
                    for row in MIXED
                    if row[0] == split and (tags is None or row[1] in tags) and low <= row[3] < high
                ]
                columns = files.indexed_columns(split, tags, block)
                assert files.summary.columns() is not None  # served by the summary, not the index
                assert len(columns) == len(kept) and columns.rows == kept
                assert all(columns[name] == Columns(kept)[name] for name in _AT)
                assert files.indexed_columns(split, tags, block) is columns  # made once per ask


@pytest.mark.parametrize("short", [0, 4, 15])
def test_a_column_one_value_short_serves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short: int
) -> None:
    """Every column holds a value a row, as many rows as its line says; written otherwise (and sealed by
    its line all the same), it serves nothing: no row is read from a column too short."""
    encoded = sealed_summary._encoded
    made: list[int] = []

    def one_short(column: list) -> object:
        made.append(1)
        return encoded(column[:-1] if len(made) - 1 == short else column)

    with monkeypatch.context() as patched:
        patched.setattr(sealed_summary, "_encoded", one_short)
        run = _written(tmp_path)
    assert _serves(run) is None
    assert SealedSummary(run.root, run.log).columns() is None
