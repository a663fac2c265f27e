"""Guards: the rules that refuse an action to keep a decision honest, each declared once.

:data:`GUARDS` is the registry: the threat model's table is generated from it. An action is refused by
:func:`refuse` (one :class:`GuardRefusal`); a candidate refused before any rollout gets a verdict without
numbers from :func:`refusal_verdict`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .._decide.basis import Basis
from .._decide.verdict import Verdict
from .._project.spec import Spec
from .._project.way_on import pasteable
from .._store.memory.seal import Seal
from .._store.rundir import RunDir
from ..exitcodes import Refusal


class Checkpoint(StrEnum):
    SESSION = "a gate, screen or grow session, before anything is planned or paid"
    SCREEN = "a gate session's screens, per candidate, before any rollout"
    HILL_CLIMB = "capevolve hill-climb, before the optimizer runs and per proposal"
    MERGE = "capevolve merge, before any step is built"
    WORK = "capevolve work new (and every work copy the loop makes)"
    COMMIT = "capevolve commit --decision accept, before anything is booked"
    SPEND = "capevolve spend's recommendation"


@dataclass(frozen=True)
class Guard:
    """One guard's declaration. ``way_on``: what an honest user does instead, per checkpoint; ``check``:
    ``module:function``; ``test``: ``path::test`` replaying the refusal."""

    name: Basis
    stops: str
    outcome: str
    check: str
    test: str
    checkpoints: tuple[Checkpoint, ...]
    way_on: Mapping[Checkpoint | str, str] = field(default_factory=dict)

    def way_on_at(self, checkpoint: Checkpoint) -> str:
        return self.way_on.get(checkpoint, self.way_on.get("", ""))


NEW_RUN = "start a new run (pytest --capevolve-run PROJECT --capevolve-new-run)"

FINALIZED = Guard(
    Basis.FINALIZED,
    stops="a best chosen after the test split was scored (it would select on held-out knowledge)",
    outcome="refused (capevolve: exit 2; a session: one usage-error line, exit 4)",
    check="pytest_capevolve._policy.guards:refuse_finalized",
    test="tests/e2e/test_finalize.py::test_after_finalize_no_new_best_can_be_chosen_in_the_run",
    checkpoints=tuple(c for c in Checkpoint if c is not Checkpoint.SCREEN),  # all but a candidate's
    way_on={
        "": NEW_RUN,
        Checkpoint.HILL_CLIMB: "start a new run: capevolve hill-climb --new-run",
        Checkpoint.MERGE: "merge in a new run (pytest --capevolve-run PROJECT --capevolve-new-run)",
        Checkpoint.WORK: f"{NEW_RUN[:-1]}, or capevolve hill-climb --new-run)",
        Checkpoint.COMMIT: (
            "gate its folder in a new run (pytest --capevolve-run PROJECT --capevolve-candidate "
            "CANDIDATE_FOLDER --capevolve-gate --capevolve-new-run); its val is scored afresh there, "
            "its test only if the spec's split_ids_file leaves out the test tasks this run scored "
            "(set before it starts)"
        ),
    },
)
TAMPER = Guard(
    Basis.TAMPER,
    stops="a candidate that changes what scores it (protected paths, the adapter, the scorer)",
    outcome="indecisive verdict, never scored",
    check="pytest_capevolve._session.refusals:Screens._tampered",
    test="tests/e2e/test_tamper.py::test_a_candidate_editing_the_scorer_is_indecisive_and_pays_nothing",
    checkpoints=(Checkpoint.SCREEN, Checkpoint.HILL_CLIMB),
    way_on={
        Checkpoint.SCREEN: "edit only what the spec's protected_paths leave free (the seed's bytes stay)",
        Checkpoint.HILL_CLIMB: "edit only what --protected-paths leaves free (the seed's bytes stay)",
    },
)
LEAK = Guard(
    Basis.LEAK,
    stops="a candidate that holds a val or test task's id or gold answer",
    outcome="indecisive verdict, never scored",
    check="pytest_capevolve._session.refusals:Screens._leaks",
    test="tests/e2e/test_leak_guard.py::test_a_candidate_embedding_a_val_task_id_is_refused_unpaid_naming_file_and_line",
    checkpoints=(Checkpoint.SCREEN,),
    way_on={
        "": "a capability that must hold answers (a fact base) is its owner's to allow: "
        "leak_guard_min_length: false in the spec, in a new run (--capevolve-new-run)"
    },
)
MICRO_TEST_FAIL = Guard(
    Basis.MICRO_TEST_FAIL,
    stops="a candidate that fails one of the project's microcases",
    outcome="reject verdict, before any rollout",
    check="pytest_capevolve._session.refusals:Screens._fails_microcases",
    test="tests/e2e/test_microcases.py::test_a_failing_microcase_rejects_before_any_rollout",
    checkpoints=(Checkpoint.SCREEN,),
    way_on={
        "": "make the candidate pass it (a microcase the seed fails is wrong: fix it before the first gate)"
    },
)
REPEAT = Guard(
    Basis.REPEAT,
    stops="paying again for bytes the run or the project already decided",
    outcome="repeat (of an accept, exit 15) or reject verdict, never paid",
    check="pytest_capevolve._policy.repeats.identity:earlier_with_bytes",
    test="tests/e2e/test_candidate_bytes.py::test_a_repeat_of_accepted_bytes_in_a_new_run_is_said_as_a_repeat_not_a_reject",
    checkpoints=(Checkpoint.SESSION, Checkpoint.HILL_CLIMB),
    way_on={"": ""},  # the check's message names it: the earlier decision, and where it stands
)
BUDGET = Guard(
    Basis.BUDGET,
    stops="a gate whose val evaluation the spend ceilings (max_usd) leave no room for",
    outcome="indecisive verdict, the optimizer's cost booked, no rollout paid",
    check="pytest_capevolve._loop.hill_climb_record:refuse_over_budget",
    test="tests/e2e/test_loop_stops.py::test_a_proposer_whose_cost_leaves_no_room_for_its_gate_stops_the_loop_before_a_rollout",
    checkpoints=(Checkpoint.HILL_CLIMB,),
    way_on={"": "raise max_usd in the spec to go on (ceilings are not locked with the run)"},
)
HARNESS_CHANGED = Guard(
    Basis.HARNESS_CHANGED,
    stops="a run measured under two harnesses (adapter, scorer, gold, conftests, what pytest loads)",
    outcome="refused in one line (a session: exit 4; capevolve eval-task: exit 2)",
    check="pytest_capevolve._store.readers.harness_lock:check_or_lock",
    test="tests/e2e/test_harness_lock.py::test_what_else_changes_a_harness_is_refused_in_one_line",
    checkpoints=(Checkpoint.SESSION,),
    way_on={"": ""},  # the check's message names it (_project/harness.py refusal): restore, or a new run
)

GUARDS: dict[Basis, Guard] = {
    g.name: g for g in (FINALIZED, HARNESS_CHANGED, TAMPER, LEAK, MICRO_TEST_FAIL, REPEAT, BUDGET)
}


class GuardRefusal(Refusal):
    """An action a guard refused; ``guard`` names which. The message ends with its way on."""

    def __init__(self, guard: Guard, message: str) -> None:
        super().__init__(message)
        self.guard = guard


def finalized_said(rundir: RunDir) -> str | None:
    if Seal(rundir).closed() is None:
        return None
    return (
        f"run {rundir.run_id} is finalized: its test split was scored, so a best chosen in it "
        "would select on held-out knowledge"
    )


def refuse_finalized(rundir: RunDir, at: Checkpoint) -> None:
    if (said := finalized_said(rundir)) is not None:
        raise GuardRefusal(FINALIZED, pasteable(f"{said}; {FINALIZED.way_on_at(at)}", rundir.project_dir))


def refusal_verdict(spec: Spec, guard: Guard, at: Checkpoint, *, reason: str, **fields: Any) -> Verdict:
    """A candidate ``guard`` refused before any rollout (tamper → indecisive, failed microcase → reject): a
    verdict without numbers, ending with the way on; ``fields``: its tag, against, decision and the
    ``details`` it rests on."""
    from .gate.verdicts import gate_config  # here: a session that refuses nothing loads no gate

    way_on, config = guard.way_on_at(at), gate_config(spec)
    reason = f"{reason}; {way_on}" if way_on else reason
    return Verdict(
        basis=guard.name, reason=reason, mode=config.mode, min_coverage=config.min_coverage, **fields
    )


def record_refusal(
    spec: Spec, rundir: RunDir, guard: Guard, tag: str, against: str, **verdict: Any
) -> Verdict:
    """The one writer of a refusal decided outside a session (hill-climb's screens before its gate)."""
    from .gate.verdicts import verdict_file

    written = refusal_verdict(spec, guard, Checkpoint.HILL_CLIMB, tag=tag, against=against, **verdict)
    rundir.verdicts.write_verdict(verdict_file(written, null_control=False))
    return written
