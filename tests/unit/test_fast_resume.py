"""A resume reads the index as columns: its plan and its table must be exactly what records give.

Planning's persisted keys and the session's table (``summarize``) are worked out from the
index's rows read as columns (:meth:`.rollout_files.RolloutFiles.indexed_columns`), with no record per rollout. These
tests hold them equal — every number to the bit, every rendered line, every missing key — to the
record path they replaced (:func:`show.report.summarize_arm` over :func:`index_records` of the
files), on the real tau2 evaluation in /work/shared/data, and hold the file checks' guarantee: a
file changed or removed by hand is noticed by the next session.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve import _stats as stats
from pytest_capevolve._items.plan import EvalPlan, PlannedCandidate, RolloutKey
from pytest_capevolve._project.blocks import first_trial
from pytest_capevolve._session.persistence import Tally, outcomes_of_columns, summarize
from pytest_capevolve._session.plan_build import valid_column_keys, valid_keys
from pytest_capevolve._show.report import render_arms, summarize_arm
from pytest_capevolve._store.readers.evidence import Outcomes, index_records
from pytest_capevolve._store.rollouts.record import RolloutRecord
from pytest_capevolve._store.rundir import RunDir
from pytest_capevolve.strategies import reward_matrices

TRIALS = 5  # the real data's trials per task


def _record(
    tag: str, task: str, trial: int, reward: float | None, infra: str | None, block: int
) -> RolloutRecord:
    # costs that do not add up exactly in binary: the cost sum must be added in the same order
    return RolloutRecord(
        run_id="r",
        split="val",
        task_id=task,
        tag=tag,
        trial=first_trial(block) + trial,
        seed=trial,
        candidate_hash="h",
        reward=reward,
        passed=None if reward is None else reward >= 0.5,
        infra_error=infra,
        cost_usd=0.1 * (trial + 1) + 0.01 * len(task),
    )


@pytest.fixture
def real_run(tmp_path: Path, shared_data: dict) -> tuple[RunDir, list[str]]:
    """The real per-task trials of four tags as a run dir (blocks 0 and 1), persisted as a session
    persists them; a task's errored trials are infra errors, and a few rollouts are left out."""
    rundir = RunDir(tmp_path / "run")
    tags = sorted(shared_data)[:4]
    for tag in tags:
        for n, (task, result) in enumerate(sorted(shared_data[tag].items())):
            for k, reward in enumerate(result["trials"]):
                if (n + k) % 17 == 3:
                    continue  # never paid: missing
                infra = "errored" if result.get("errored") or (n * 7 + k) % 23 == 5 else None
                for block in (0, 1) if n % 4 == 0 else (0,):
                    rundir.rollouts.record_rollout(
                        _record(tag, task, k, None if infra else reward, infra, block)
                    )
    rundir.flush()
    return rundir, tags


def _plan(task_ids: list[str], tags: list[str], num_trials: int, block: int = 0) -> EvalPlan:
    candidates = [PlannedCandidate(tag, tag, "h") for tag in tags]
    return EvalPlan("r", "val", task_ids, num_trials, 0, candidates, block=block)


def _by_records(plan: EvalPlan, rundir: RunDir, tally: Tally) -> tuple[list, list]:
    """The table and the missing keys the way the session worked them out before: arms of
    records read from the files, each arm summarised by walking its records."""
    by_tag = index_records(rundir.rollouts.rollouts("val", block=None), plan.block)
    reused: dict[str, int] = {}
    for key in plan.persisted:
        reused[key[2]] = reused.get(key[2], 0) + 1
    rows = [
        summarize_arm(
            by_tag.get(c.tag, {}),
            tag=c.tag,
            split=plan.split,
            task_ids=plan.task_ids,
            num_trials=plan.num_trials,
            paid=tally.paid.get(c.tag, 0),
            reused=reused.get(c.tag, 0),
        )
        for c in plan.candidates
    ]
    missing = [
        k
        for k in plan.all_keys()
        if (r := by_tag.get(k.tag, {}).get((k.task_id, k.trial - plan.first_trial))) is None or not r.valid
    ]
    return rows, missing


def _same(a: object, b: object) -> bool:
    """Equal, nan equal to nan, floats to the bit."""
    if isinstance(a, float) and isinstance(b, float):
        return a.hex() == b.hex() or (math.isnan(a) and math.isnan(b))
    return a == b


@pytest.mark.parametrize(
    ("num_trials", "block", "extra_tasks"),
    [(TRIALS, 0, []), (3, 0, ["not-a-task"]), (TRIALS, 1, [])],
    ids=["all-trials", "fewer-trials-and-an-unknown-task", "replicate-block"],
)
def test_the_table_from_columns_is_the_table_from_records(real_run, num_trials, block, extra_tasks) -> None:
    rundir, tags = real_run
    planned = tags[:3] + ["never-ran"]
    task_ids = sorted({r.task_id for r in rundir.rollouts.rollouts("val", block=None)}, key=int)
    plan = _plan(task_ids + extra_tasks, planned, num_trials, block)
    columns = rundir.rollouts.indexed_columns("val", set(planned) | {"seed"}, block)
    keys = set(plan.all_keys())
    plan.persisted = keys & valid_column_keys(columns)
    assert plan.persisted == keys & valid_keys(rundir.rollouts.rollouts("val", block=None)), "planning's keys"
    tally = Tally(paid={planned[0]: 3})

    fast = summarize(plan, outcomes_of_columns(columns, block), tally, against=tags[0])
    rows, missing = _by_records(plan, rundir, tally)

    assert fast.missing == missing and missing, "the same missing keys, in plan order"
    assert all(isinstance(k, RolloutKey) for k in fast.missing)
    assert render_arms(fast.rows) == render_arms(rows)
    for mine, theirs in zip(fast.rows, rows, strict=True):
        for field, value in mine.to_dict().items():
            assert _same(value, theirs.to_dict()[field]), (mine.tag, field, value, theirs.to_dict()[field])
    assert any(r.infra for r in fast.rows) and any(r.pass_k is not None for r in fast.rows)
    # the arms path (other sessions, Ctrl-C) answers the same through Outcomes.of_arms
    arms = summarize(
        plan,
        index_records(rundir.rollouts.indexed_rollouts("val", None, None), block),
        tally,
        against=tags[0],
    )
    assert render_arms(arms.rows) == render_arms(rows) and arms.missing == missing


def test_a_table_with_everything_persisted_has_nothing_missing(real_run) -> None:
    rundir, tags = real_run
    present = {(r.tag, r.task_id, r.trial) for r in rundir.rollouts.rollouts("val") if r.valid}
    task_ids = sorted({t for _, t, _ in present if all((tags[0], t, k) in present for k in range(2))})
    plan = _plan(task_ids, tags[:1], 2)
    columns = rundir.rollouts.indexed_columns("val", tags[:1])
    plan.persisted = set(plan.all_keys()) & valid_column_keys(columns)
    fast = summarize(plan, outcomes_of_columns(columns, 0), Tally(), against=tags[0])
    rows, missing = _by_records(plan, rundir, Tally())
    assert fast.missing == missing == [] and fast.exit_code == 0
    assert render_arms(fast.rows) == render_arms(rows)


def test_the_next_session_reads_a_file_changed_or_removed_by_hand(real_run) -> None:
    rundir, tags = real_run
    before = rundir.rollouts.indexed_columns("val", tags[:1])
    assert rundir.rollouts.indexed_columns("val", tags[:1]) is before, (
        "a session's planning and table: one check"
    )
    record = next(r for r in rundir.rollouts.rollouts("val") if r.tag == tags[0] and r.valid)
    path = rundir.rollout_path("val", record.task_id, record.tag, record.trial)
    edited = RolloutRecord.from_json({**record.to_json(), "reward": 0.25, "passed": False})
    path.write_text(edited.dumps() + "\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    reader = RunDir(rundir.root)
    after = reader.rollouts.indexed_columns("val", tags[:1])
    # read again, and not what its event logged: quarantined, so owed again (never a 0.25)
    key = ("val", record.task_id, record.tag, record.trial)
    assert key not in valid_column_keys(after) and len(after) == len(before) - 1
    assert any("edited after it was written" in n for n in reader.notices) and not path.exists()
    other = next(
        r
        for r in rundir.rollouts.rollouts("val")
        if r.tag == tags[0] and r.valid and r.task_id != record.task_id
    )
    rundir.rollout_path("val", other.task_id, other.tag, other.trial).unlink()  # by hand: owed again
    gone = RunDir(rundir.root).rollouts.indexed_columns("val", tags[:1])
    assert ("val", other.task_id, other.tag, other.trial) not in valid_column_keys(gone)
    assert len(gone) == len(after) - 1


def test_owed_keys_follow_the_sets_they_were_worked_out_from() -> None:
    plan = _plan(["a", "b"], ["x", "y"], 2)
    every = plan.all_keys()
    assert plan.owed_keys() == every and plan.owed_keys() is not plan.owed_keys()
    plan.persisted = set(every)
    assert plan.owed_keys() == []
    plan.persisted = {("val", "a", "x", 0)}  # a plain tuple key equals the plan's key
    assert plan.owed_keys() == every[1:]
    plan.awaited = {("val", "b", "y", 1)}
    assert plan.owed_keys() == every[1:-1]
    assert EvalPlan.from_wire(plan.to_wire()).owed_keys() == every[1:-1]


@given(
    tasks=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=6),
    tags=st.lists(st.sampled_from(["x", "y", "z"]), min_size=1, max_size=3, unique=True),
    trials=st.integers(1, 3),
    block=st.integers(0, 2),
    ordered=st.booleans(),
)
def test_all_keys_are_every_cell_in_item_order_task_then_trial_then_candidate(
    tasks: list[str], tags: list[str], trials: int, block: int, ordered: bool
) -> None:
    """The keys made as zipped columns are the nested comprehension's, one RolloutKey each (a task listed
    twice, the sequential order, a replicate block's trials too)."""
    plan = _plan(tasks, tags, trials, block)
    if ordered:
        plan.order = list(reversed(tasks))
    low = first_trial(block)
    expected = [
        ("val", task, tag, k)
        for task in plan.order or tasks
        for k in range(low, low + trials)
        for tag in tags
    ]
    keys = plan.all_keys()
    assert keys == expected and {type(k) for k in keys} == {RolloutKey}
    assert [k.task_id for k in keys] == [k[1] for k in expected]


def test_owing_nothing_holds_only_for_the_sets_it_was_said_of() -> None:
    """build_plan says a plan owes nothing when its persisted and awaited keys cover all of its keys; that
    answer is the lookup's, and a plan whose sets are replaced afterwards is looked up again."""
    plan = _plan(["a", "b", "a"], ["x", "y"], 2)  # a task listed twice: its keys twice, owed once each
    every = plan.all_keys()
    plan.persisted, plan.awaited = set(every[:6]), set(every[6:8])
    assert len(plan.persisted) + len(plan.awaited) == len(set(every))
    plan.owes_nothing()
    assert plan.owed_keys() == [] == [k for k in every if k not in plan.persisted | plan.awaited]
    plan.persisted = set(every[1:6])  # replaced: owed is looked up again
    assert plan.owed_keys() == [every[0], every[8]]


def test_reused_counts_a_key_persisted_and_awaited_once() -> None:
    """summarize's reused column counts the union of persisted and awaited, built or not."""
    plan = _plan(["a", "b"], ["x", "y"], 2)
    every = plan.all_keys()
    plan.persisted = set(every[:5])
    plan.awaited = set(every[3:7])  # two keys in both: each still one reused rollout
    outcome = summarize(plan, Outcomes.of_arms({}), Tally(), against="x")
    union = plan.persisted | plan.awaited
    assert (
        [row.reused for row in outcome.rows]
        == [sum(k.tag == tag for k in union) for tag in ("x", "y")]
        == [4, 3]
    )


def test_a_plan_from_another_package_version_defaults_what_it_lacks_and_refuses_what_it_does_not_know() -> (
    None
):
    """Issue 38, trap 6: a worker of an older or newer package than the controller failed with a bare
    KeyError ('awaited'). A field an older controller did not send takes its default; one this worker
    does not know (or a required one missing) is refused naming both versions and the way on."""
    from pytest_capevolve.exitcodes import UsageError

    plan = _plan(["a", "b"], ["x", "y"], 2)
    plan.persisted = {("val", "a", "x", 0)}
    older = plan.to_wire()
    for name in ("awaited", "block", "budget", "pool_digest", "version"):
        del older[name]
    read = EvalPlan.from_wire(older)
    assert (read.awaited, read.block, read.budget) == (set(), 0, None)
    assert read.owed_keys() == plan.owed_keys()
    newer = {**plan.to_wire(), "version": "9.9", "lanes": 3}
    with pytest.raises(
        UsageError, match=r"\(lanes\): the worker runs pytest-capevolve \S+, the controller 9\.9"
    ):
        EvalPlan.from_wire(newer)
    with pytest.raises(UsageError, match=r"\(run_id\).*install the same version"):
        EvalPlan.from_wire({k: v for k, v in plan.to_wire().items() if k != "run_id"})


def _pass_hat_k_per_task(passes: np.ndarray, k: int) -> float | None:
    """pass^k as it was worked out before: one estimate per task, in a loop."""
    values = []
    for row in stats.core.as_matrix(passes):
        valid = row[~np.isnan(row)]
        if valid.size >= k:
            values.append(math.comb(int(np.sum(valid >= 0.5)), k) / math.comb(int(valid.size), k))
    return float(np.mean(values)) if values else None


@given(reward_matrices(max_tasks=60, missing=True), st.integers(1, 6))
def test_pass_hat_k_equals_the_per_task_loop_to_the_bit(matrix, k) -> None:
    mine, theirs = stats.pass_hat_k(matrix, k), _pass_hat_k_per_task(matrix, k)
    assert (mine is None and theirs is None) or (
        mine is not None and theirs is not None and _same(mine, theirs)
    )


def test_outcomes_of_no_rollouts_give_empty_arms() -> None:
    rewards, passes, infra, cost = Outcomes([], [], [], [], [], [], []).arm_arrays("x", ["a"], 2)
    assert np.isnan(rewards).all() and np.isnan(passes).all() and (infra, cost) == (0, 0.0)


def test_a_record_read_from_the_index_reads_like_the_file_record(real_run) -> None:
    rundir, tags = real_run
    by_file = {r.key: r for r in rundir.rollouts.rollouts("val")}
    indexed = rundir.rollouts.indexed_rollouts("val", tags[:2])
    assert indexed and all(isinstance(r, RolloutRecord) for r in indexed)
    for record in indexed:
        full = by_file[record.key]
        for name in ("run_id", "task_id", "tag", "trial", "seed", "candidate_hash", "reward", "passed"):
            assert getattr(record, name) == getattr(full, name), name
        assert (record.infra_error, record.cost_usd, record.valid, record.block) == (
            full.infra_error,
            full.cost_usd,
            full.valid,
            full.block,
        )
        assert record.feedback == "" and record.output is None  # outcome fields only
    one = indexed[0]
    assert pickle.loads(pickle.dumps(one)) == one and hash(pickle.loads(pickle.dumps(one))) == hash(one)
    changed = dataclasses.replace(one, reward=0.5)
    assert type(changed) is RolloutRecord and changed.reward == 0.5 and changed.task_id == one.task_id
    assert RolloutRecord.from_json(one.to_json()).key == one.key
