"""Every kind of event in ``events.jsonl``, declared once: its name and its fields.

A :class:`Kind` is the name the log holds with the ``TypedDict`` of its fields: appends refuse an
undeclared field before a byte is written, and readers of one kind are typed, so mypy checks them.
A field added later is ``NotRequired``; any may be missing from an older line (readers ``.get``)."""

from typing import Any, Generic, NotRequired, TypedDict, TypeVar

from ..._decide.alpha_budget import DECISION_EVENT  # _decide, a floor below, reads these two by name
from ..._decide.calibration import NULL_EVENT

E = TypeVar("E")


class UndeclaredEvent(TypeError):
    """An append of an undeclared kind or field: a bug in the caller, raised before anything is written."""


class Kind(str, Generic[E]):
    """A declared kind: compares, hashes and is written as its name; ``fields`` is its type."""

    fields: type[E]
    meaning: str
    allowed: frozenset[str]

    def __new__(cls, name: str, fields: type[E], meaning: str) -> "Kind[E]":  # no __future__: NotRequired
        kind = super().__new__(cls, name)
        kind.fields, kind.meaning = fields, meaning
        keys: Any = fields  # a TypedDict class: its keys, as typing records them
        kind.allowed = keys.__required_keys__ | keys.__optional_keys__  # seq, ts, kind, prev: the log's
        return kind

    def __reduce__(self) -> tuple[type[str], tuple[str]]:  # copied or pickled: its name alone
        return (str, (str(self),))


def check(kind: str, fields: dict[str, Any]) -> None:
    """Refuse an undeclared kind, or a field its declaration lacks (a declared one may be left out)."""
    found = DECLARED.get(kind)
    if found is None:
        raise UndeclaredEvent(
            f"event kind {kind!r} is not declared; declare it once in pytest_capevolve/_store/log/"
            "event_kinds.py (a TypedDict of its fields and a Kind) and append it by that name"
        )
    if not found.allowed.issuperset(fields):
        raise UndeclaredEvent(
            f"a {kind} event with undeclared field(s) {sorted(set(fields) - found.allowed)}; declare "
            f"them in {found.fields.__name__} (pytest_capevolve/_store/log/event_kinds.py)"
        )


class RunCreated(TypedDict):
    spec: str
    run_id: str
    frozen: NotRequired[dict[str, Any]]  # the spec's frozen keys as locked: spec.lock.yaml is held to it


SpecChanged = TypedDict("SpecChanged", {"changed": list[str]})
SplitsFrozen = TypedDict("SplitsFrozen", {"sizes": dict[str, int], "ids_sha256": str})
HarnessLocked = TypedDict("HarnessLocked", {"files": dict[str, str]})
TaskKeys = TypedDict("TaskKeys", {"keys": dict[str, str]})
# names: what the secret names (snapshot folders, rollout files); absent in a run an older version made
Secret = TypedDict("Secret", {"sha256": str, "path": str, "names": NotRequired[list[str]]})
OrderNonceDrawn = TypedDict("OrderNonceDrawn", {"content_hash": str, "nonce": str})
GateFrozen = TypedDict("GateFrozen", {"settings": dict[str, Any], "overridden": dict[str, Any]})
Claimed = TypedDict("Claimed", {"claim": str, "keys": dict[str, list[str]]})
SessionLoad = TypedDict(
    "SessionLoad", {"concurrency": int, "workers": int, "in_flight": int, "paid_tags": dict[str, int]}
)
Quarantined = TypedDict("Quarantined", {"file": str, "problem": str, "moved_to": str})
RolloutVanished = TypedDict("RolloutVanished", {"files": list[str]})
SessionLeft = TypedDict("SessionLeft", {"checkpoint": int})
SessionFinished = TypedDict(
    "SessionFinished", {"paid": int, "missing": int, "dead_workers": list[str], "exit_code": int}
)
CandidateRegistered = TypedDict("CandidateRegistered", {"tag": str, "content_hash": str})
Microcases = TypedDict("Microcases", {"tag": str, "ran": int, "failed": list[str]})
NullGated = TypedDict("NullGated", {"tag": str, "against": str | None, "decision": str, "alpha": float})
SequentialGate = TypedDict("SequentialGate", {"interrupted": bool, "tags": dict[str, Any]})
Grown = TypedDict(
    "Grown", {"tag": str, "against": str, "look": int, "trials": int, "level": float, "decision": str}
)
Judging = TypedDict("Judging", {"claim": str, "tag": str, "against": str, "cells": int})
JudgeFailed = TypedDict("JudgeFailed", {"tag": str, "against": str, "task_id": str, "trial": int})


class Planned(TypedDict):
    split: str
    tags: list[str]
    owed: int
    reused: int
    awaited: NotRequired[int]
    block: NotRequired[int]
    candidate_code: NotRequired[str]
    best: NotRequired[str]
    screen: NotRequired[str]
    grown: NotRequired[str]
    look: NotRequired[int]


class Rollout(TypedDict):
    split: str
    task_id: str
    tag: str
    trial: int
    reward: float | None
    infra_error: str | None
    cost_usd: NotRequired[float]
    sha256: NotRequired[str]
    claim: NotRequired[str | None]


class Verdict(TypedDict):
    tag: str
    against: str | None
    decision: str | None
    basis: str | None
    p_value: float | None
    delta_mean: float | None
    sha256: str


class GateDecision(TypedDict):
    tag: str
    against: str | None
    decision: str
    schedule: str
    j: int | None
    alpha_j: float | None
    alpha_round: NotRequired[float | None]
    discarded: NotRequired[bool | None]


class Screen(TypedDict):
    tag: str
    against: str
    screen: str
    tasks: int
    decision: str
    basis: str | None
    delta_mean: float | None
    p_harm: float | None
    fired: int
    full_val_rollouts: int


class Preference(TypedDict):
    tag: str
    against: str
    task_id: str
    trial: int
    order: str
    seed: int
    preference: Any
    claim: str


class Iteration(TypedDict):
    tag: str
    phase: str
    parent: NotRequired[str]
    optimizer: NotRequired[str]
    diff_sha256: NotRequired[str]
    cost_usd: NotRequired[float]
    tokens: NotRequired[int]
    seconds: NotRequired[float]


class TaskEval(TypedDict):
    tag: str
    content: str
    tasks: dict[str, str]
    trials: int
    rollouts: int
    cost_usd: float
    file: str


class LedgerNumbers(TypedDict):
    delta_mean: float | None
    p_value: float | None
    bar: float | None
    verdict: NotRequired[str | None]
    fixed: list[str]
    broke: list[str]


Lineage = TypedDict("Lineage", {"tag": str, "parent": str, "merged_from": NotRequired[list[str]]})


class BookedDecision(Lineage, LedgerNumbers):
    gated_against: str | None
    decision: str
    basis: str | None
    note: str
    forced: bool
    repairs: int | None
    against_gate: bool
    rollouts: int
    runner_usd: float
    changed_files: list[str]
    diff: NotRequired[str]  # a reject's unified diff against its parent, bounded
    label: NotRequired[str]  # an accept re-gated after a harness change: the label every view shows
    shared_ledger: NotRequired[dict[str, str]]  # repeats another project's decision: project, ledger
    # whether candidate code (as the verdict said) and the optimizer (as this process knows) were
    # confined by the kernel: {"candidate_code": label, "optimizer": label}
    confinement: NotRequired[dict[str, str]]
    optimizer_usd: float
    optimizer_tokens: int
    optimizer_seconds: float
    journal_sha256: str  # the round's journal entry frozen at its first decision (journals/<tag>.md)


BestChanged = TypedDict("BestChanged", {"best_id": str, "previous": str, "basis": NotRequired[str]})
StateRebuilt = TypedDict("StateRebuilt", {"problem": str, "best_id": str, "spent": NotRequired[float]})
EventsRepaired = TypedDict("EventsRepaired", {"moved": int, "to": str, "problem": str})
WorkCreated = TypedDict("WorkCreated", {"tag": str, "parent": str, "merged_from": NotRequired[list[str]]})
HillClimbStopped = TypedDict("HillClimbStopped", {"reason": str, "best": str})
Mechanism = TypedDict(
    "Mechanism", {"id": str, "text": str, "tasks": list[str], "by": str | None, "repeat": NotRequired[bool]}
)
SealOpened = TypedDict("SealOpened", {"test_ids": list[str]})
SealScored = TypedDict(
    "SealScored",
    {"best": str, "mean": float | None, "seal": str, "test_ids": list[str], "test_reused": NotRequired[bool]},
)
OutcomesChecked = TypedDict(
    "OutcomesChecked",
    {"offset": int, "upto": int, "rollouts": int, "digest": str, "state": NotRequired[dict[str, Any]]},
)
RolloutsSummarized = TypedDict(
    "RolloutsSummarized", {"offset": int, "upto": int, "rollouts": int, "sha256": str}
)
RUN_CREATED = Kind("run_created", RunCreated, "The run dir was made from the spec.")
SPEC_CHANGED = Kind("spec_changed", SpecChanged, "Spec keys that moved since the run was made.")
SPLITS_FROZEN = Kind("splits_frozen", SplitsFrozen, "The train/val/test partition was written, once.")
HARNESS_LOCKED = Kind("harness_locked", HarnessLocked, "The digests of the harness, locked with the run.")
TASK_KEYS = Kind("task_keys", TaskKeys, "Each task's content key: a task across runs, whatever its id.")
ORDER_SECRET_CREATED = Kind(
    "order_secret_created",
    Secret,
    "The commitment to the run's secret (task orders, folder and file names).",
)
ORDER_NONCE_DRAWN = Kind("order_nonce_drawn", OrderNonceDrawn, "A sequential gate's nonce for some bytes.")
GATE_SETTINGS_FROZEN = Kind("gate_settings_frozen", GateFrozen, "The gate settings, frozen once.")
SESSION_STARTED = Kind("session_started", Planned, "An evaluation session planned its rollouts.")
SCREEN_STARTED = Kind("screen_started", Planned, "A screen session planned its rollouts.")
GROW_STARTED = Kind("grow_started", Planned, "A grow session planned its rollouts.")
FINALIZE_STARTED = Kind("finalize_started", Planned, "A finalize planned its test rollouts.")
CLAIMED = Kind("claimed", Claimed, "A session's claim on the rollouts it will pay.")
SESSION_LOAD = Kind("session_load", SessionLoad, "How many rollouts a session ran at once, for which tags.")
ROLLOUT = Kind("rollout", Rollout, "One rollout persisted: outcome, cost, its file's sha256.")
ROLLOUT_QUARANTINED = Kind("rollout_quarantined", Quarantined, "A rollout file moved aside: paid again.")
ROLLOUT_VANISHED = Kind("rollout_vanished", RolloutVanished, "Rollout files the log records were found gone.")
OUTCOMES_CHECKED = Kind("outcomes_checked", OutcomesChecked, "The outcomes' digest at a point of the log.")
ROLLOUTS_SUMMARIZED = Kind(
    "rollouts_summarized",
    RolloutsSummarized,
    "The sealed summary's sha256: every train and val row at this point.",
)
SESSION_LEFT = Kind("session_left", SessionLeft, "A paying session let go of the log.")
SESSION_FINISHED = Kind("session_finished", SessionFinished, "A paying session ended with this exit code.")
CANDIDATE_REGISTERED = Kind("candidate_registered", CandidateRegistered, "A candidate's snapshot taken.")
MICROCASES = Kind("microcases", Microcases, "A candidate's microcases ran before any rollout.")
VERDICT = Kind("verdict", Verdict, "A verdict file was written (its sha256 and headline numbers).")
NULL_GATED = Kind(NULL_EVENT, NullGated, "A null control gated: it counts in the null tally.")
GATE_DECISION = Kind(DECISION_EVENT, GateDecision, "A verdict on val and its alpha slot.")
SEQUENTIAL_GATE = Kind("sequential_gate", SequentialGate, "A sequential gate session's looks, per tag.")
SCREEN = Kind("screen", Screen, "A subset screen's decision (kill, promote or go on).")
GROWN = Kind("grown", Grown, "A grow look's decision at its number of trials.")
JUDGING = Kind("judging", Judging, "A session's claim to judge a pair's cells.")
PREFERENCE = Kind("preference", Preference, "One judgement of a pair's outputs in one presentation order.")
JUDGE_FAILED = Kind("judge_failed", JudgeFailed, "A cell whose judging failed, held at worst.")
DECISION = Kind("decision", BookedDecision, "A decision booked by ``commit``: lineage, numbers, spend.")
BEST_CHANGED = Kind("best_changed", BestChanged, "The run's best moved.")
STATE_REBUILT = Kind("state_rebuilt", StateRebuilt, "``state.json`` disagreed with the log: rebuilt.")
EVENTS_REPAIRED = Kind("events_repaired", EventsRepaired, "A damaged tail of the log was moved aside.")
WORK_CREATED = Kind("work_created", WorkCreated, "A work copy made from its parent (or a merge).")
HILL_CLIMB_ITERATION = Kind("hill_climb_iteration", Iteration, "A hill-climb round began or proposed.")
HILL_CLIMB_STOPPED = Kind("hill_climb_stopped", HillClimbStopped, "The hill-climb stopped, and why.")
TASK_EVAL = Kind("task_eval", TaskEval, "A ``capevolve task-eval`` answer, filed under the run.")
MECHANISM = Kind("mechanism", Mechanism, "A failure mechanism listed (or joined) in MECHANISMS.md.")
TEST_OPENED = Kind("test_opened", SealOpened, "The test seal opened, before any test rollout.")
TEST_SCORED = Kind("test_scored", SealScored, "The finalize scored the best on the test split.")

DECLARED: "dict[str, Kind[Any]]" = {k: k for k in list(globals().values()) if isinstance(k, Kind)}
