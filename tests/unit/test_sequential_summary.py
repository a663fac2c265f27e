"""The sequential gate's summary lines, on a gate fed rollouts by hand (no session)."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

from pytest_capevolve._session.sequential_gate import SequentialGate
from pytest_capevolve._store.rollouts.record import RolloutRecord

TASKS = [f"t{i}" for i in range(6)]


class NoRollouts:
    def indexed_rollouts(self, *args: object) -> list[RolloutRecord]:
        return []


class NoEvents:
    def of_kinds(self, *kinds: str) -> list[dict[str, object]]:
        return []


def gate(gated: list[str]) -> SequentialGate:
    plan = SimpleNamespace(task_ids=TASKS, num_trials=1, orders=None, order=TASKS, split="val", block=None)
    return SequentialGate(
        config=None,  # type: ignore[arg-type]  # summary() reads none of these
        spec=SimpleNamespace(gate_min_effect=0.05, success_threshold=1.0),  # type: ignore[arg-type]
        rundir=SimpleNamespace(rollouts=NoRollouts(), log=NoEvents(), run_id="r", rollout_file=str),  # type: ignore[arg-type]
        plan=plan,  # type: ignore[arg-type]
        best="seed",
        gated=gated,
        alphas={tag: Fraction(1, 20) for tag in gated},
    )


def test_a_tag_no_e_process_stopped_is_decided_by_the_exact_test_at_its_whole_alpha() -> None:
    """sequential.md: "neither by the end of val: the exact gate at α decides" (the split gives the
    exhaustion the whole α); the line said "at the α left over", as if the looks had spent some."""
    g = gate(["cand"])
    for tag in ("seed", "cand"):
        for task in TASKS:  # the same reward on both sides: no e-process can cross
            g._add(RolloutRecord("r", "val", task, tag, 0, 0, "h", reward=0.5))
    g._update(["cand"])
    assert g.summary()[0].startswith(
        "sequential cand: no crossing over all 6 tasks: the exact test decided at α = 0.05 (efficacy e = "
    )


def test_a_session_whose_candidates_were_all_refused_claims_no_plan() -> None:
    """A candidate byte-identical to the best is refused before any rollout (no null controls, no
    items); the summary said "the stop saved 0 rollouts (of 160 planned …)" for a session that ran none."""
    assert gate([]).summary() == []
