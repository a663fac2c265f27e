"""report.md and dashboard.html are drawn again only when what they show moved (``views.json``),
and a resume that changed nothing imports no scipy; the dashboard reads the index, opening only
the rollout files whose feedback it shows."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_capevolve import exitcodes
from pytest_capevolve._show.dashboard import build, model
from pytest_capevolve._store.rollouts.rollout_files import RolloutFiles
from pytest_capevolve._store.rundir import RunDir


def test_the_dashboard_opens_only_the_files_it_details(tmp_path, val_rollout, monkeypatch) -> None:
    """Outcome fields come from the index; feedback and output only for the first
    DETAIL_LIMIT rollouts below 1, each read from its file — never every rollout file."""
    rundir = RunDir(tmp_path / ".capevolve" / "runs" / "r1")
    rundir.root.mkdir(parents=True)
    tasks = [f"t{i}" for i in range(6)]
    rundir.ensure_splits(lambda: {"train": [], "val": tasks, "test": []})
    for i, task in enumerate(tasks):
        reward = 1.0 if i % 2 else 0.0
        record = val_rollout("seed", task, 0, reward)
        rundir.rollouts.record_rollout(
            dataclasses.replace(record, feedback=f"feedback-{task}", output=f"out-{task}")
        )
    rundir.flush()
    monkeypatch.setattr(model, "DETAIL_LIMIT", 2)
    opened: list[tuple] = []
    read_rollout = RolloutFiles.read_rollout

    def counting(self, *key):
        opened.append(key)
        return read_rollout(self, *key)

    monkeypatch.setattr(RolloutFiles, "read_rollout", counting)
    monkeypatch.setattr(RolloutFiles, "rollouts", lambda *a, **k: pytest.fail("read every rollout file"))
    page = build(RunDir(rundir.root), num_trials=1)
    assert opened == [("val", "t0", "seed", 0), ("val", "t2", "seed", 0)]  # the first two failures
    assert "feedback-t0" in page and "feedback-t2" in page and "out-t2" in page
    assert "feedback-t4" not in page and "feedback-t1" not in page  # t4 past the limit; t1 passed
    assert page.count('<td class="feedback">·</td>') == 4  # shown without detail, reward only


def test_the_exit_codes_a_session_replaces_are_pytests() -> None:
    replaceable = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)
    assert exitcodes.REPLACEABLE == replaceable
