"""The sequential gate's task order is fixed only once the candidate's bytes are: derived from
its content hash and the run's secret (issue 25, item 8). A candidate that placed its gains
first in the order computable from the spec and the code (one shuffle per base_seed) no longer
crosses the efficacy threshold more often than one whose gains sit anywhere."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pytest_capevolve._decide import stopping, task_order
from pytest_capevolve._store.rundir import RunDir
from pytest_capevolve._store.sessions import order_secret

N, TRIALS, DRAWS = 40, 5, 300
IDS = [f"task{i:02d}" for i in range(N)]


def base_seed_order(seed: int = 0) -> list[str]:
    """The order the sequential gate used before: one shuffle per base_seed, the same for every
    candidate, computable in advance by anyone holding the spec and the code."""
    order = sorted(IDS)
    random.Random(f"capevolve-sequential:{seed}").shuffle(order)
    return order


def rates(gains: list[str], losses: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    """A candidate exactly as good as the best on average: +0.8 on ``gains``, −0.8 on ``losses``."""
    cand, best = dict.fromkeys(IDS, 0.5), dict.fromkeys(IDS, 0.5)
    for t in gains:
        cand[t], best[t] = 1.0, 0.2
    for t in losses:
        cand[t], best[t] = 0.2, 1.0
    return cand, best


def crosses(order: list[str], arms: tuple[dict[str, float], dict[str, float]], rng) -> bool:
    cand, best = arms
    deltas = [(rng.random(TRIALS) < cand[t]).mean() - (rng.random(TRIALS) < best[t]).mean() for t in order]
    decision = stopping.track(deltas, alpha=stopping.split(0.05), min_effect=0.05, total_tasks=N)
    return decision.state.stopped == "efficacy"


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "a sequential gate's task order read from the source, the gains placed first; or computed from "
        "the run's secret (readable by the same user) for byte variants ground until one puts its "
        "gains first"
    ),
    outcome=(
        "prevented: the order is keyed by the candidate's content hash, a per-run secret and a nonce "
        "drawn when a sequential gate first plans those bytes (no order exists to compute before "
        "then), all recorded in the verdict"
    ),
)
def test_gains_placed_first_in_the_base_seed_order_no_longer_cross_more_often():
    rng = np.random.default_rng(2026)
    known = base_seed_order()
    placed = rates(known[:8], known[-8:])  # the attack: gains first in the knowable order
    shuffled = list(IDS)
    random.Random(7).shuffle(shuffled)
    unrelated = rates(shuffled[:8], shuffled[-8:])
    old = np.mean([crosses(known, placed, rng) for _ in range(DRAWS)])
    # each draw a run with its own secret; the candidate's bytes (its hash) fixed
    new = np.mean(
        [crosses(task_order.task_order(IDS, rng.bytes(32), "sha256:cand"), placed, rng) for _ in range(DRAWS)]
    )
    control = np.mean(
        [
            crosses(task_order.task_order(IDS, rng.bytes(32), "sha256:cand"), unrelated, rng)
            for _ in range(DRAWS)
        ]
    )
    assert old >= 0.9  # the reproduction: the knowable order let the placed gains cross
    assert new <= control + 0.02 and new <= 0.05


def test_the_order_differs_across_candidates_and_runs_and_is_the_same_for_the_same_pair():
    one, two = bytes(32), bytes(range(32))
    a = task_order.task_order(IDS, one, "hash-a")
    assert a == task_order.task_order(list(reversed(IDS)), one, "hash-a")  # resume, any worker
    assert sorted(a) == sorted(IDS)
    assert a != task_order.task_order(IDS, one, "hash-b")  # other bytes
    assert a != task_order.task_order(IDS, two, "hash-a")  # another run's secret
    assert task_order.interleaved([["x", "y", "z"], ["z", "x", "y"]]) == ["x", "z", "y"]


def test_the_secret_is_made_with_the_run_committed_to_the_log_and_kept_out_of_candidates(
    tmp_path, monkeypatch
):
    import secrets

    monkeypatch.setattr(order_secret, "new_secret", lambda: secrets.token_bytes(32))
    roots = [tmp_path / "runs" / name for name in ("r1", "r2")]
    made = []
    for root in roots:
        root.mkdir(parents=True)
        rundir = RunDir(root)
        rundir.order_secret.create()
        made.append(rundir.order_secret.read())
        assert rundir.order_secret.recorded() == task_order.commitment(made[-1])
        assert rundir.order_secret.path.parent.name == "secret"  # not candidates/, work/, a snapshot
        assert (rundir.order_secret.path.stat().st_mode & 0o077) == 0
    assert made[0] != made[1]


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "a sequential gate's task order read from the source, the gains placed first; or computed from "
        "the run's secret (readable by the same user) for byte variants ground until one puts its "
        "gains first"
    ),
)
def test_a_replaced_or_deleted_secret_is_refused_in_one_line(tmp_path):
    root = tmp_path / "runs" / "r1"
    root.mkdir(parents=True)
    rundir = RunDir(root)
    rundir.order_secret.create()
    rundir.order_secret.path.write_text(bytes(range(1, 33)).hex())  # chosen to give a known order
    with pytest.raises(order_secret.OrderSecretError, match="does not match the SHA-256"):
        rundir.order_secret.read()
    rundir.order_secret.path.unlink()  # deleted, to draw a fresh order for the same bytes
    with pytest.raises(order_secret.OrderSecretError, match="missing or damaged"):
        RunDir(root).order_secret.read()
