"""Run ids sort by creation: "the newest run" (what every command uses by default) is the
last one made, even when several are made in the same second."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_capevolve._project.spec import GUARD_KEYS
from pytest_capevolve._store import rundir as rundir_module
from pytest_capevolve._store.rundir import RunDir, new_run_id


def test_runs_made_in_the_same_second_resolve_to_the_last_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundir_module.time, "strftime", lambda fmt, *when: "20261130-120000")
    made = []
    for _ in range(5):
        run = RunDir.resolve(tmp_path, new=True)
        (run.root / "spec.lock.yaml").write_text("".join(f"{key}: []\n" for key in GUARD_KEYS))
        made.append(run.run_id)
        assert RunDir.resolve(tmp_path).run_id == run.run_id
    assert made == sorted(made) and len(set(made)) == 5


@pytest.fixture
def far_east(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14: a local stamp is a day ahead of UTC
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_run_id_is_stamped_in_utc_whatever_the_local_zone(far_east: None) -> None:
    """Local stamps sort wrong across a clock change or between two machines' zones (an earlier
    run made east of here would sort after a later one made here)."""
    before = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    stamp = new_run_id()[:15]
    after = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    assert before <= stamp <= after, (before, stamp, after)
