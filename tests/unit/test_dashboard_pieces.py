"""dashboard.html drawn in pieces, on real evaluation data (tests/data: τ²-bench airline, six
tags × 12 tasks × 5 trials): the bytes the page had when it was drawn as one string, written
to its file as drawn (atomically: a failure mid-page leaves the old page), and a session's own
val records used only when they hold every tag the page shows."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_capevolve._project.spec import Spec
from pytest_capevolve._show import views
from pytest_capevolve._show.dashboard import build, model, write_dashboard
from pytest_capevolve._show.dashboard import page as page_module
from pytest_capevolve._show.measure import measure
from pytest_capevolve._store import files
from pytest_capevolve._store.log import events
from pytest_capevolve._store.readers.evidence import index_records
from pytest_capevolve._store.rundir import RunDir

# sha256 of the page of real_run() (DETAIL_LIMIT = 100) as drawn by the renderer before it
# drew in pieces (commit 3d8c239, one string). A change to what the page shows on purpose
# changes it; a change to how the page is drawn must not. (Changed on purpose once since: the
# arms' 95 % CIs below 200 tasks are Student's t, issue 25; the bootstrap's page hashed 60be6d3a…)
# (drawn again in issue 37: the page says whether candidate code and the optimizer were confined)
# (issue 38: the best-so-far caption says "95% t interval", not "bootstrap CI"; with the old words
# the page hashes ae0e102b…, the numbers are unchanged; then the spend and lineage sections and
# their CSS went, the rest byte for byte but the CSP's style hash: 84bec82c… with them)
PAGE_BEFORE_PIECES = "dcd1464cfad62f81b5ff7394955e9ba0a0c30c4fd8db3d96b78712f9ed30b37c"
TRIALS = 5


def real_run(root: Path, shared_data: dict, val_rollout) -> RunDir:
    """The shared data as a run dir, with what a page must tell apart: a tag never run on a
    task (missing), a task with infra errors only, one infra error among valid trials, a grown
    tag (a sixth trial), null-control and candidate verdicts and their decisions."""
    rundir = RunDir(root / ".capevolve" / "runs" / "r1")
    rundir.root.mkdir(parents=True)
    tasks = sorted(shared_data["seed"], key=int)
    rundir.ensure_splits(lambda: {"train": [], "val": tasks, "test": []})
    rundir.log.append_event("session_started", split="val")
    for tag, per_task in shared_data.items():
        for task in tasks:
            if (tag, task) == ("cA_partial", "40"):
                continue
            row = per_task[task]
            for k, reward in enumerate(row["trials"]):
                infra = (
                    "adapter timed out"
                    if (tag, task) == ("c0_null5c", "44")
                    or (tag, task, k)
                    == (
                        "cB_becabin",
                        "8",
                        4,
                    )
                    else None
                )
                record = val_rollout(tag, task, k, None if infra else float(reward), infra=infra)
                rundir.rollouts.record_rollout(
                    dataclasses.replace(
                        record, feedback=row["feedback"], output={"task": task, "trial": k}, cost_usd=0.01
                    )
                )
    rundir.rollouts.record_rollout(val_rollout("seed", "0", TRIALS, 0.0))  # grown: a sixth trial
    readme = {
        "c0_null5": -0.1,
        "c0_null5b": -0.05,
        "c0_null5c": 0.0,
        "cA_partial": 0.0167,
        "cB_becabin": 0.0167,
    }
    for tag, delta in readme.items():
        null = tag.startswith("c0_null")
        rundir.verdicts.write_verdict(
            {
                "tag": tag,
                "against": "seed",
                "decision": "reject",
                "basis": "k_se",
                "null_control": null,
                "n_tasks": 12,
                "delta_mean": delta,
                "ci": [delta - 0.13, delta + 0.13],
                "bar": 0.0628 * 0.2,
                "p_value": 0.4,
                "reason": "Δ̄ below k·SE",
            }
        )
        if not null:
            rundir.log.append_event(
                "decision",
                tag=tag,
                parent="seed",
                decision="reject",
                basis="k_se",
                delta_mean=delta,
                p_value=0.4,
            )
    rundir.flush()
    return rundir


class LogClock:
    """``time`` as the event log sees it: each event half a second after the one before (the
    spend plot's times are the run's, whatever else asked the clock in between)."""

    def __init__(self) -> None:
        self.ticks = itertools.count()

    def time(self) -> float:
        return 1_700_000_000.0 + 0.5 * next(self.ticks)

    def __getattr__(self, name: str):
        return getattr(time, name)


@pytest.fixture
def frozen_clock(monkeypatch):
    monkeypatch.setattr(events, "time", LogClock())


@pytest.fixture
def run(tmp_path, shared_data, val_rollout, frozen_clock, monkeypatch) -> RunDir:
    rundir = real_run(tmp_path, shared_data, val_rollout)
    monkeypatch.setattr(model, "DETAIL_LIMIT", 100)  # 163 rollouts scored below 1: the limit bites
    monkeypatch.setattr(page_module, "DETAIL_LIMIT", 100)  # and the drill-down's caption says so
    return RunDir(rundir.root)


def test_the_page_drawn_in_pieces_is_the_page_drawn_whole(run: RunDir) -> None:
    html = build(run, TRIALS)
    assert hashlib.sha256(html.encode()).hexdigest() == PAGE_BEFORE_PIECES
    # every rollout (a sixth trial too) less the missing, the infra errors and the detailed
    assert html.count('<td class="feedback">·</td>') == 6 * 12 * 5 + 1 - 5 - 6 - 100
    path = write_dashboard(run, TRIALS)
    assert path.read_bytes() == html.encode()


def test_a_page_that_fails_while_drawn_leaves_the_old_page(run: RunDir, monkeypatch) -> None:
    path = write_dashboard(run, TRIALS)
    before = path.read_bytes()
    monkeypatch.setattr(files, "WRITE_CHUNK", 1000)  # several writes before the failure

    def failing():
        yield "<p>" * 2000
        raise RuntimeError("drawing failed")

    with pytest.raises(RuntimeError, match="drawing failed"):
        run.write_dashboard(failing())
    assert path.read_bytes() == before
    assert [p.name for p in run.root.iterdir() if p.name.endswith(".tmp")] == []


def _spec(run: RunDir) -> Spec:
    project = run.root.parents[2]
    return Spec(project / "capevolve.yaml", project, "adapter.py:A", project, num_trials=TRIALS)


def test_the_session_s_val_records_are_drawn_only_when_they_hold_every_tag(run: RunDir, monkeypatch) -> None:
    whole = build(run, TRIALS, measure(_spec(run), run))
    every = index_records(run.rollouts.indexed_rollouts("val"))
    mine = {tag: arm for tag, arm in every.items() if tag in ("seed", "cA_partial")}  # a session's own

    # a session that read only its tags: the page still shows every tag (read from the index)
    assert views.refresh(_spec(run), run, {"val": mine}) is None
    assert run.dashboard_path.read_text() == whole

    # a session that holds every tag: its records are drawn, not indexed a second time
    run.dashboard_path.unlink()
    monkeypatch.setattr(model, "index_records", lambda *a, **k: pytest.fail("val indexed again"))
    assert views.refresh(_spec(run), run, {"val": every}) is None
    assert run.dashboard_path.read_text() == whole


def test_the_index_steps_past_a_tail_without_rollouts(run: RunDir) -> None:
    """The index holds only rollout and quarantine events of the log's tail; a tail of other
    events still moves it to the log's end, so they are not read again."""
    run.log.append_event("session_started", split="val")
    run.log.append_event("best_changed", best_id="seed", previous="seed")
    run.flush()
    size, _, seq = run.log.tail()
    assert run.index.position() == (size, seq)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 40),
    st.lists(st.sampled_from([0.0, 0.1, 0.3, 1.0, 2 / 3, float("nan")]), min_size=1, max_size=480),
)
def test_a_column_s_task_means_are_each_row_s_nanmean_bit_for_bit(tasks: int, trials: int, values) -> None:
    """The heatmap's task means come from one nanmean over the rows that hold a trial, each the
    float np.nanmean gives that row alone (the page's numbers stay what they were)."""
    matrix = np.resize(np.array(values), (tasks, trials))
    column = model._columns(
        {"seed": {}}, {"seed": matrix}, [f"t{i}" for i in range(tasks)], ["seed"], trials
    )["seed"]
    for row in range(tasks):
        alone = float(np.nanmean(matrix[row])) if column.valid[row] else None
        said = float(column.means[row]) if column.valid[row] else None
        assert (alone, int(column.valid[row])) == (said, int(np.sum(~np.isnan(matrix[row]))))
