"""The resolution of the exact gate: the smallest win it can accept at a level, from the
sign-flip test's own attainable p-values; and the level the next decision is taken at."""

from __future__ import annotations

import shlex
from fractions import Fraction as F
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._decide.verdict import Verdict
from pytest_capevolve._policy.alpha.resolution import next_level, out_of_reach
from pytest_capevolve._project.spec import Spec
from pytest_capevolve._project.way_on import shown
from pytest_capevolve._stats.sign_flip import sign_flip_on_integers, smallest_win


def test_twelve_val_tasks_need_five_wins_at_005_and_six_under_holm_with_three_siblings():
    assert smallest_win(F(1, 20), 12) == 5  # 1/32 ≤ 1/20 < 1/16
    assert smallest_win(F(1, 60), 12) == 6  # Holm's α/3: 1/64 ≤ 1/60 < 1/32
    assert smallest_win(F(1, 40), 12) == 6  # the first of two looks (α/2)
    assert smallest_win(F(1, 20), 4) is None  # even 4 of 4 gives p = 1/16 > 1/20


def best_p(improved: int, n_tasks: int) -> F:
    """The exact p of ``improved`` tasks better by one, the rest unchanged: the best a win that size gets."""
    result = sign_flip_on_integers([1] * improved + [0] * (n_tasks - improved))
    assert result is not None  # unit deltas: the exact count always fits
    return result.fraction


@given(st.integers(1, 40), st.fractions(F(1, 10**6), F(1, 2)))
def test_the_smallest_win_is_the_first_k_whose_best_p_meets_the_level(n, level):
    k = smallest_win(level, n)
    if k is None:
        assert best_p(n, n) > level
    else:
        assert best_p(k, n) <= level and (k == 1 or best_p(k - 1, n) > level)
        assert best_p(k, n) == F(1, 2**k)  # k better, none worse: only the all-positive pattern


def _spec(**keys) -> Spec:
    project = Path("/nowhere")
    return Spec(project / "capevolve.yaml", project, "adapter.py:A", project, **keys)


def test_the_next_level_takes_the_family_share_and_the_first_look():
    assert next_level(_spec(), [], 1)[0] == F(1, 20)
    assert next_level(_spec(), [], 3)[0] == F(1, 60)
    assert next_level(_spec(grow_max_looks=2), [], 1)[0] == F(1, 40)


def test_a_reject_below_its_levels_resolution_says_it_was_out_of_reach():
    per_task = {
        f"t{i}": {"best": 0.0, "candidate": 1.0 if i < 2 else 0.0, "delta": 1.0 if i < 2 else 0.0}
        for i in range(12)
    }
    verdict = Verdict(
        tag="c",
        against="seed",
        decision="reject",
        basis="exact",
        reason="p = 0.25 > α = 0.05",
        mode="exact",
        min_coverage=0.8,
        alpha=0.05,
        n_tasks=12,
        per_task=per_task,
    )
    noted = out_of_reach(verdict)
    assert noted.reason.endswith(
        "it improves 2 of 12 tasks, fewer than the 5 (with none worse) its level α = 0.05 can accept: out of reach on this val"
    )
    assert noted.details["resolution"] == {"improved": 2, "smallest_win": 5}
    wide = {t: {**row, "delta": 1.0} for t, row in per_task.items()}
    assert out_of_reach(Verdict(**{**verdict.__dict__, "per_task": wide})).reason == verdict.reason


def test_a_val_too_small_for_any_accept_is_told_so():
    from pytest_capevolve._policy.alpha.resolution import resolution

    found = resolution(_spec(), [], 4)
    assert (found["smallest_win"], found["reachable"]) == (None, False)
    assert found["sentence"].startswith("no candidate can be accepted at the next decision's level (α = 0.05")
    assert "1/2^4 > α" in found["sentence"]
    assert resolution(_spec(), [], 12, 3)["sentence"].endswith("improve ≥ 6 of 12 tasks with none worse")


# -- an edit of gate_min_effect: can it pass, and for how many decisions (issue 39, items 4-5) ------


def _loop_spec(schedule: str, trials: int = 3, min_effect: float = 0.15) -> Spec:
    return Spec(
        path=Path("capevolve.yaml"),
        project_dir=Path("."),
        adapter="adapter.py",
        capability_path=Path("capability"),
        num_trials=trials,
        gate_alpha_schedule=schedule,
        gate_min_effect=min_effect,
    )


def _rejects(*deltas: str) -> list[dict]:
    return [
        {"kind": "gate_decision", "j": j, "decision": "reject", "discarded": delta.startswith("-")}
        for j, delta in enumerate(deltas, start=1)
    ]


def test_a_twenty_task_val_says_up_front_how_many_decisions_it_supports():
    from pytest_capevolve._policy.alpha.resolution import min_effect_reach, most_tasks

    # +0.15 on 20 tasks × 3 trials improves at most 9 tasks (one trial in 3 each): 2^-9 ≤ level
    assert most_tasks(0.15, 20, 3) == 9
    lord = min_effect_reach(_loop_spec("lord"), [], 20)
    # lord's levels 0.0304, 0.0076, 0.0034 need 6, 8, 9 improved; the 4th (0.0019) needs 10
    assert (lord["passes_next"], lord["decisions_supported"]) == (True, 3)
    addis = min_effect_reach(_loop_spec("addis"), [], 20)
    assert addis["decisions_supported"] == 2 and "that count" in addis["sentence"]
    assert min_effect_reach(_loop_spec("constant"), [], 20)["decisions_supported"] is None  # every one
    # addis: decisions with Δ̄ < 0 spend nothing, so they leave the support where it was
    assert min_effect_reach(_loop_spec("addis"), _rejects("-1/20", "-1/10"), 20)["decisions_supported"] == 2
    assert min_effect_reach(_loop_spec("addis"), _rejects("1/20"), 20)["decisions_supported"] == 1


def test_spend_says_stop_when_the_spent_alpha_puts_the_target_out_of_reach():
    """Issue 39's run: 22 val tasks, lord, after three rejects α = 0.0019 needs 10 of 22 improved;
    an edit of +0.15 improves at most 9. The first decision could pass it: stop, and say why and
    what would help."""
    from pytest_capevolve._policy.alpha.resolution import resolution
    from pytest_capevolve._policy.budget.spend import _out_of_reach

    fresh = resolution(_loop_spec("lord"), [], 22)
    assert fresh["min_effect"]["passes_next"] and _out_of_reach(fresh) is None
    spent = resolution(_loop_spec("lord"), _rejects("1/22", "0", "1/11"), 22)
    assert spent["reachable"] and spent["smallest_win"] == 10
    assert not spent["min_effect"]["passes_next"] and spent["min_effect"]["passed_first"]
    reason = _out_of_reach(spent)
    assert reason is not None and reason.startswith("stop: no edit of Δ̄ = gate_min_effect +0.15 can pass")
    assert "a val of ≥ 23 tasks (a new run)" in reason and "out of reach" in reason
    # a val too small for the target from the start is said, not a stop: larger edits still pass
    small = resolution(_loop_spec("lord", min_effect=0.05), [], 22)
    assert not small["min_effect"]["passes_next"] and _out_of_reach(small) is None
    # no candidate at all can pass: stop whatever the target
    assert _out_of_reach(resolution(_loop_spec("lord"), _rejects(*["1/22"] * 40), 12)) is not None


def test_a_run_frozen_under_lord_keeps_it_when_the_default_moved_on(tmp_path):
    from types import SimpleNamespace

    from pytest_capevolve._decide.alpha_budget import LOOP_SCHEDULE
    from pytest_capevolve._policy.alpha.gate_settings import (
        loop_default,
        next_decision_spec,
        run_loop_schedule,
    )

    assert LOOP_SCHEDULE == "addis"
    frozen = [{"settings": {"gate_alpha_schedule": "lord", "gate_alpha": 0.05}}]
    rundir = SimpleNamespace(run_id="r1", log=SimpleNamespace(of_kinds=lambda *_: frozen))
    (tmp_path / "capevolve.yaml").write_text("gate_alpha: 0.05\n")  # names no schedule
    spec = Spec(
        **{**_loop_spec("constant").__dict__, "path": tmp_path / "capevolve.yaml", "project_dir": tmp_path}
    )
    assert loop_default(spec, rundir, {})[0].gate_alpha_schedule == "lord"  # type: ignore[arg-type]
    assert next_decision_spec(spec, rundir).gate_alpha_schedule == "lord"  # type: ignore[arg-type]
    assert run_loop_schedule(rundir) == "lord"  # type: ignore[arg-type]
    frozen[0]["settings"]["gate_alpha_schedule"] = "constant"
    assert loop_default(spec, rundir, {})[0].gate_alpha_schedule == "constant"  # type: ignore[arg-type]
    # a run whose first decision froze constant keeps it: a loop that passed addis to its gates
    # was refused at every round (the tutorial's gate, then hill-climb, exited 3 forever)
    assert run_loop_schedule(rundir) == "constant"  # type: ignore[arg-type]


def test_the_baseline_says_its_levels_are_the_loops_until_a_first_decision(tmp_path):
    """A new user: `baseline` printed α = 0.01562 (addis) and "no edit of +0.05 can pass", then
    the tutorial's one-shot gate ran at constant α = 0.05 — two αs, no word why. The hand-off now
    says its levels are the loop's and what a one-shot gate would freeze; once frozen, nothing."""
    from types import SimpleNamespace

    from pytest_capevolve._policy.alpha.gate_settings import handoff_schedule_note

    frozen: list[dict[str, object]] = []
    rundir = SimpleNamespace(run_id="r1", log=SimpleNamespace(of_kinds=lambda *_: frozen))
    (tmp_path / "capevolve.yaml").write_text("gate_alpha: 0.05\n")  # names no schedule
    spec = Spec(
        **{**_loop_spec("constant").__dict__, "path": tmp_path / "capevolve.yaml", "project_dir": tmp_path}
    )
    note = handoff_schedule_note(spec, rundir)  # type: ignore[arg-type]
    assert note is not None and "loop's (gate_alpha_schedule addis" in note
    assert "gates at constant α = 0.05 instead and freezes that for the run" in note
    # the one-shot gate of this project, the folder named as what it is (it said `--capevolve-run .
    # --capevolve-candidate DIR`, wherever the project was)
    project = shlex.quote(shown(tmp_path))
    assert (
        f"(pytest --capevolve-run {project} --capevolve-candidate CANDIDATE_FOLDER --capevolve-gate)" in note
    )
    frozen.append({"settings": {"gate_alpha_schedule": "constant", "gate_alpha": 0.05}})
    assert handoff_schedule_note(spec, rundir) is None  # type: ignore[arg-type]
    frozen.clear()
    (tmp_path / "capevolve.yaml").write_text("gate_alpha_schedule: constant\n")  # the spec chose
    assert handoff_schedule_note(spec, rundir) is None  # type: ignore[arg-type]


def test_val_reuse_reads_the_discards_too():
    from pytest_capevolve._policy.budget.val_budget import val_reuse

    reuse = val_reuse(_loop_spec("addis"), _rejects("-1/20", "-1/10"), {}, 20)
    assert reuse["next_alpha"] == 1 / 64  # two clear non-improvements spent nothing
    assert val_reuse(_loop_spec("addis"), _rejects("1/20"), {}, 20)["next_alpha"] < 1 / 64


def test_the_baseline_s_headroom_verdict():
    from pytest_capevolve._policy.alpha.resolution import headroom

    assert headroom([1.0] * 10 + [0.0, 0.5], 5)["verdict"] == "saturated"  # 2 below 1, 5 needed
    assert "add harder val tasks" in headroom([1.0] * 10 + [0.0, 0.5], 5)["reason"]
    assert headroom([0.0] * 11 + [0.5], 5)["verdict"] == "floor"  # mean 0.04: check the harness
    ok = headroom([0.0, 0.5, 1.0, 0.2, 0.4, 0.6, 1.0], 5)
    assert (ok["verdict"], ok["tasks_below_perfect"]) == ("ok", 5)
    assert headroom([0.5] * 12, None)["verdict"] == "saturated"  # no candidate can pass at all
    assert headroom([float("nan"), 0.5, 0.5], 1)["val_tasks"] == 2


def test_under_a_margin_the_val_reuse_advice_says_its_mde_is_for_better():
    """A new user with `gate_margin: -0.02` read "30 val tasks detect only effects ≥ +0.151":
    the superiority test's MDE, while the run asks "no worse than -0.02". It says so now."""
    from dataclasses import replace

    from pytest_capevolve._policy.budget.val_budget import val_reuse

    events = [{"kind": "gate_decision", "tag": "c1", "decision": "reject"}]
    verdicts = {"c1": {"se": 0.06, "n_tasks": 30}}
    plain = val_reuse(_loop_spec("constant", min_effect=0.05), events, verdicts, 30)["advice"]
    assert "detect only effects" in plain and "no worse than" not in plain
    margin = replace(_loop_spec("constant", min_effect=0.05), gate_margin=-0.02)
    said = val_reuse(margin, events, verdicts, 30)["advice"]
    assert said.startswith(plain) and "this run asks 'no worse than -0.02'" in said


def test_a_gate_decision_left_unbooked_is_said_so_with_the_command_that_books_it():
    """Issue 38, trap 5: under ``--capevolve-commit none`` the session said "1 gate decision(s) so
    far" where nothing was booked; α is spent either way, and the line now says which decision
    waits for its booking, and the command that books it."""
    from pytest_capevolve._policy.budget.val_budget import decisions_said, val_reuse

    events = [
        {"kind": "gate_decision", "tag": "c1", "decision": "accept"},
        {"kind": "gate_decision", "tag": "c2", "decision": "reject"},
        {"kind": "decision", "tag": "c2", "decision": "reject"},
    ]
    reuse = val_reuse(_loop_spec("constant"), events, {}, 30, run_id="r1")
    book = "capevolve commit c1 . --run-id r1 --decision accept"  # this run's, however new another is
    assert reuse["unbooked"] == {"c1": "accept"} and reuse["book"] == book
    said = decisions_said(reuse)
    assert said.startswith(
        "val reuse (constant): 2 gate decision(s) on val so far, 1 decided but not booked: "
    )
    assert f"`{book}` books 'c1'; the next gets α = 0.05" in said
    # a session under commit auto books its own decisions right after the line: an earlier one waits
    events.append({"kind": "gate_decision", "tag": "c3", "decision": "accept"})
    reuse = val_reuse(_loop_spec("constant"), events, {}, 30, booking={"c3"})
    assert (
        reuse["unbooked"] == {"c1": "accept"} and reuse["book"] == "capevolve commit c1 . --decision accept"
    )
    events += [{"kind": "decision", "tag": t, "decision": "accept"} for t in ("c1", "c3")]
    assert "not booked" not in decisions_said(val_reuse(_loop_spec("constant"), events, {}, 30))
    # a reject waiting: its basis is a flag of its own (pasted, `--decision 'reject --reject-basis gate'`
    # was refused by commit's parser)
    events.append({"kind": "gate_decision", "tag": "c4", "decision": "reject"})
    reuse = val_reuse(_loop_spec("constant"), events, {}, 30, run_id="r1")
    assert reuse["book"] == "capevolve commit c4 . --run-id r1 --decision reject --reject-basis gate"
