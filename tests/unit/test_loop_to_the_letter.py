"""Issue 26's "looks implemented, isn't" parts that are pure: the screen ledger's saving against
what was paid later, pass@k in the arm table, the merge reminder for accepted siblings, and
hill-climb's back-compat focus name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_capevolve._cli.main import build_parser
from pytest_capevolve._decide import screen
from pytest_capevolve._policy.budget.spend import merge_reminder, unmerged_siblings
from pytest_capevolve._show.report import arm_summary, render_arms


def test_a_killed_candidate_evaluated_on_full_val_later_saved_nothing() -> None:
    """Five kills of 50 rollouts' full val each, 10 fired per screen: +200 net on paper. One of
    them was then evaluated on full val anyway (its 10 screen rollouts reused, 40 more paid):
    its kill saved nothing, so the ledger nets +160 — 250 without screens less the 90 paid —
    not +200 (the audit's +250 reported vs ≤ +50 real)."""
    events = [
        {"tag": t, "screen": "tier1", "decision": "kill", "fired": 10, "full_val_rollouts": 50}
        for t in "abcde"
    ]
    paper = screen.ledger(events)
    assert (paper["saved"], paper["net_rollouts"]) == (250, 200)
    paid = {"a": 50, "b": 10, "c": 10, "d": 10, "e": 10}
    real = screen.ledger(events, paid)
    # a's saving is its screen's own 10 rollouts (reused by its full val): net 0 for a
    assert (real["saved"], real["fired"], real["net_rollouts"]) == (210, 50, 160)
    assert real["net_rollouts"] == 5 * 50 - sum(paid.values())
    # evaluated twice over (re-paid with --capevolve-rerun): never a negative saving
    assert screen.ledger(events[:1], {"a": 120})["saved"] == 0
    # a kill that paid nothing beyond its screen keeps its whole saving
    assert screen.ledger(events[:1], {"a": 10})["saved"] == 50


def test_the_arm_table_shows_pass_at_k_beside_pass_hat_k() -> None:
    # task 1 passes 1 of 2 trials, task 2 none: pass^2 = 0, pass@2 = 1/2
    passes = np.array([[1.0, 0.0], [0.0, 0.0]])
    row = arm_summary(
        (passes.copy(), passes, 0, 0.0), tag="seed", split="val", tasks=2, num_trials=2, paid=4, reused=0
    )
    assert row.pass_k == 0.0 and row.pass_at_k == pytest.approx(0.5)
    header, line = render_arms([row])
    assert "pass@k" in header.split() and "0.500" in line.split()


def _accept(tag: str, parent: str, fixed: list[str]) -> dict:
    return {"kind": "decision", "decision": "accept", "tag": tag, "parent": parent, "fixed": fixed}


def test_accepted_siblings_that_fixed_disjoint_tasks_are_named_until_merged() -> None:
    events = [
        _accept("a", "seed", ["t1", "t2"]),
        _accept("b", "seed", ["t3"]),  # re-gated against a: the best holds b's edit only
        _accept("c", "b", ["t4"]),  # a child, not a sibling
    ]
    project = Path("/srv/my-agent")
    [pair] = unmerged_siblings(events, project)
    # the command as merge takes it: --tag is required (it printed without one once), and it names the
    # project, so it works from where `capevolve spend PROJECT` was typed (issue 38, trap 4)
    command = "capevolve merge a b --tag a_b --project /srv/my-agent"
    assert pair["tags"] == ["a", "b"] and pair["command"] == command
    assert command in merge_reminder([pair]) and merge_reminder([]) == ""
    parsed = build_parser().parse_args(pair["command"].split()[1:])  # merge's parser takes it
    assert parsed.tag == "a_b" and parsed.project_option == project
    # overlapping fixes are not disjoint clusters; a merge work copy settles the pair
    overlapping = [_accept("a", "seed", ["t1"]), _accept("b", "seed", ["t1", "t3"])]
    assert unmerged_siblings(overlapping, project) == []
    merged = {"kind": "work_created", "tag": "ab", "merged_from": ["a", "b"]}
    assert unmerged_siblings([*events, merged], project) == []


def test_hill_climb_accepts_cap_evolve_s_all_at_once_focus() -> None:
    args = build_parser("hill-climb").parse_args(["hill-climb", "--focus", "all-at-once"])
    assert args.focus == "all-at-once"
