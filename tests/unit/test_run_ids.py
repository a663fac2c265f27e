"""Run ids sort by creation: "the newest run" (what every command uses by default) is the
last one made, even when several are made in the same second."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_capevolve._store import rundir as rundir_module
from pytest_capevolve._store.rundir import RunDir


def test_runs_made_in_the_same_second_resolve_to_the_last_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundir_module.time, "strftime", lambda fmt: "20261130-120000")
    made = []
    for _ in range(5):
        run = RunDir.resolve(tmp_path, new=True)
        (run.root / "spec.lock.yaml").write_text("{}\n")
        made.append(run.run_id)
        assert RunDir.resolve(tmp_path).run_id == run.run_id
    assert made == sorted(made) and len(set(made)) == 5
