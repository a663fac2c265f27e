"""What ``commit`` refuses to book: a decision the record cannot support, each refusal naming the way on.
:func:`.commit.book` asks these before it books anything."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ..._decide.basis import REJECT_BASES, Basis
from ..._project.spec import Spec
from ..._project.way_on import commit_command, pasteable, shown
from ..._store.files import read_json
from ..._store.log.event_kinds import GATE_DECISION, ROLLOUT, SCREEN
from ..._store.rundir import RunDir
from ..._store.snapshots import unknown_tag
from ...exitcodes import Refusal

DECISIONS = ("accept", "reject", "inconclusive", "provisional")
# "repeat": bytes the run already holds under another tag, booked unpaid (_policy/repeats/identity.py)
# A gate session in auto mode also books "indecisive" (tamper, coverage, error imbalance):
# the candidate could not be judged, which is neither an accept nor a reject.
INDECISIVE = "indecisive"


class CommitRefused(Refusal):
    """The decision would corrupt the record; the message says why and what would do."""


class Asked(NamedTuple):
    """A decision asked for ``tag``, with the verdict it reads, the best now, and ``--force``."""

    tag: str
    decision: str
    basis: str | None
    verdict: dict[str, Any] | None
    best: str
    force: bool


def refuse_unknown(rundir: RunDir, tag: str, verdict: dict[str, Any] | None) -> None:
    if tag in rundir.snapshots.known_tags() or verdict is not None:
        return
    if rundir.work_dir(tag).is_dir():
        gate = pasteable(
            f"pytest --capevolve-run PROJECT --capevolve-candidate {rundir.work_dir(tag)} --capevolve-gate",
            rundir.project_dir,
        )
        raise CommitRefused(f"{tag!r} is a work copy with no verdict yet; gate it first: {gate}")
    raise CommitRefused(unknown_tag(tag, rundir.run_id, rundir.snapshots.known_tags(), rundir.project_dir))


def check_evidence(spec: Spec, rundir: RunDir, asked: Asked, *, adopted: bool) -> None:
    """What the log must hold behind the decision (skipped by ``--force``)."""
    tag, basis = asked.tag, asked.basis
    if asked.decision == "accept" and not adopted:
        first_decision_stands(rundir, tag, asked.verdict)
    if basis == Basis.GATE:
        check_gate_scored(rundir, tag, asked.verdict)
    if basis in SCREEN_KILL_BASES:
        check_screen_kill(rundir, tag, basis)
    if basis in EVIDENCED_BASES:
        EVIDENCED_BASES[basis](spec, rundir, tag)


def first_decision_stands(rundir: RunDir, tag: str, verdict: dict[str, Any] | None) -> None:
    """An accept is booked only on the gate's first decision at the tag's level against this parent: a
    verdict that reads otherwise was judged on evidence paid since (a grown verdict has its own level)."""
    looks = ((verdict or {}).get("details") or {}).get("looks") or {}
    if verdict is None or int(looks.get("look", 1)) > 1:
        return
    against = verdict.get("against")
    first = next(
        (
            e
            for e in rundir.log.of_kinds(GATE_DECISION)
            if e.get("tag") == tag and e.get("against") == against
        ),
        None,
    )
    if first is not None and first.get("decision") != "accept":
        raise CommitRefused(
            f"the gate decided {tag!r} {first.get('decision')} against {against!r} at its level (decision "
            f"j = {first.get('j')}, gate_decision seq {first.get('seq')}); the verdict gated since on "
            "evidence paid after it is a second look at that level, not a new decision — evaluate a new "
            "version under a new tag"
        )


def check(spec: Spec, rundir: RunDir, asked: Asked, *, adopted: bool = False) -> bool:
    """Refuse what the record cannot support; returns whether an accept goes against the gate."""
    if asked.decision not in (*DECISIONS, INDECISIVE):
        raise CommitRefused(f"decision {asked.decision!r} is not one of {', '.join(DECISIONS)}")
    if asked.decision == "accept":
        return check_accept(spec, rundir, asked, adopted=adopted)
    check_not_accept(asked)
    return False


def check_accept(spec: Spec, rundir: RunDir, asked: Asked, *, adopted: bool) -> bool:
    """An accept needs an accepting full-val verdict against the best (``force``: True, against the gate)."""
    tag = asked.tag
    if asked.basis is not None:
        raise CommitRefused("--reject-basis goes with a reject, not an accept")
    if tag == asked.best:
        raise CommitRefused(f"{tag!r} is already the best")
    if adopted:
        return False
    verdict = full_verdict_against_best(rundir, tag, asked.verdict, asked.best)
    paired = float(verdict.get("coverage", {}).get("paired", 0.0))
    if paired < spec.min_coverage:
        raise CommitRefused(
            f"tag {tag!r}: its verdict covers {paired:.0%} of val, below min_coverage {spec.min_coverage:.0%}"
        )
    if verdict.get("decision") == "accept":
        return False
    if not asked.force:
        raise CommitRefused(
            f"the gate did not accept {tag!r} ({verdict.get('decision')}: {verdict.get('reason')}); "
            "accepting against the gate needs --force, and the record will say so"
        )
    return True


def full_verdict_against_best(
    rundir: RunDir, tag: str, verdict: dict[str, Any] | None, best: str
) -> dict[str, Any]:
    if verdict is not None and verdict.get("decision") == "repeat":
        raise CommitRefused(
            f"{tag!r} repeats bytes already decided ({verdict.get('reason')}); only an accept an "
            f"earlier run booked against the bytes of this run's best {best!r} can be adopted here, and "
            "this one was not: change its bytes and gate the new version"
        )
    full = verdict is not None and verdict.get("n_tasks", 0) > 0
    if verdict is not None and not full and verdict.get("against") == best:
        # gated against the best, but never scored (a repeat, a leak, a tamper, a microcase):
        # gating the same bytes again says the same, so "gate it" would be no way on
        raise CommitRefused(
            f"accepting {tag!r} needs a full-val verdict against the current best {best!r}; its "
            f"verdict scored no val task ({verdict.get('decision')}: {verdict.get('reason')}). Book "
            f"what it decided ({_book_reject(rundir, tag, _booked_basis(verdict))}), or change the bytes "
            "and gate them under a new tag"
        )
    if not full or verdict is None or verdict.get("against") != best:
        seen = "no verdict" if verdict is None else f"a verdict against {verdict.get('against')!r}"
        raise CommitRefused(
            f"accepting {tag!r} needs a full-val verdict against the current best {best!r}; there is "
            f"{seen}. Gate it: {evaluating(rundir, tag, '--capevolve-gate')}"
        )
    return verdict


def check_gate_scored(rundir: RunDir, tag: str, verdict: dict[str, Any] | None) -> None:
    """A reject on basis ``gate`` of a verdict that scored nothing on a basis of its own (a microcase's, a
    repeat's): the ledger and rejected.jsonl would say the gate refuted an edit no rollout measured."""
    if verdict is None or verdict.get("n_tasks", 0) > 0 or _booked_basis(verdict) == Basis.GATE:
        return
    raise CommitRefused(
        f"{tag!r} was not refuted by the gate: its verdict scored no val task ({verdict.get('decision')}: "
        f"{verdict.get('reason')}). Book what it decided: "
        f"`{_book_reject(rundir, tag, _booked_basis(verdict))}`"
    )


def _book_reject(rundir: RunDir, tag: str, basis: str) -> str:
    """The commit that books ``tag`` a reject on ``basis`` in this run of this project."""
    return commit_command(tag, "reject", rundir.project_dir, rundir.run_id, "--reject-basis", basis)


def _booked_basis(verdict: dict[str, Any]) -> str:
    """The basis a reject of a verdict that scored nothing is booked on: its own, where commit takes it
    (a microcase's, a repeat's), else the gate's — never a gate that refuted what no rollout measured."""
    basis = verdict.get("basis")
    return str(basis) if verdict.get("decision") == "reject" and basis in REJECT_BASES else Basis.GATE


def source_folder(rundir: RunDir, tag: str) -> Path:
    """The folder ``tag`` was registered from, for a command that evaluates it again (its snapshot
    when that folder is gone: a session would write its bytecode there, so it is never the first choice)."""
    meta = rundir.snapshots.candidate_dir(tag) / "candidate.json"
    source = str(read_json(meta).get("source", "")) if meta.is_file() else ""
    folder = Path(rundir.project_dir or ".", source)
    return folder if source and folder.is_dir() else rundir.snapshots.snapshot_dir(tag)


def evaluating(rundir: RunDir, tag: str, flag: str) -> str:
    """The command that evaluates ``tag`` again with ``flag``: the folder it was registered from
    (:func:`source_folder`), under its tag."""
    folder = source_folder(rundir, tag)
    command = f"pytest --capevolve-run PROJECT --capevolve-candidate {shlex.quote(shown(folder))} "
    return pasteable(f"{command}--capevolve-tag {tag} {flag}", rundir.project_dir)


def check_not_accept(asked: Asked) -> None:
    """A reject names its basis; inconclusive waits for a grow; provisional needs Δ̄ > 0 under the bar
    (``force`` books either now)."""
    tag, decision, basis, verdict, _, force = asked
    if decision == "reject":
        if basis not in REJECT_BASES:
            raise CommitRefused(f"a reject needs --reject-basis, one of {', '.join(REJECT_BASES)}")
    elif basis is not None and decision != INDECISIVE:
        raise CommitRefused(f"--reject-basis goes with a reject, not {decision!r}")
    grown = int((verdict or {}).get("details", {}).get("looks", {}).get("look", 1)) > 1
    if decision == "inconclusive" and not force and not grown:
        raise CommitRefused(
            f"{tag!r} cannot be booked inconclusive before it has been grown (more trials); "
            "--force to book it now"
        )
    if decision == "provisional" and not force:
        check_provisional(tag, verdict)


def check_provisional(tag: str, verdict: dict[str, Any] | None) -> None:
    delta = (verdict or {}).get("delta_mean")
    if verdict is None or verdict.get("decision") == "accept" or not (delta or 0) > 0:
        has = (
            "no verdict"
            if verdict is None
            else f"Δ̄ = {'—' if delta is None else format(delta, '+.4f')} and a verdict of "
            f"{verdict.get('decision')}"
        )
        raise CommitRefused(f"provisional is for a verdict with Δ̄ > 0 under the bar; {tag!r} has {has}")


# A screen kill is booked as a reject under the basis its kill rests on (_decide/screen.py).
SCREEN_KILL_BASES: dict[str, str] = {Basis.SCREEN_KILL: "harm", Basis.CEILING: "ceiling"}


def check_screen_kill(rundir: RunDir, tag: str, basis: str) -> None:
    """A reject on basis ``screen_kill`` or ``ceiling`` needs a screen that killed ``tag`` on that ground."""
    wanted = SCREEN_KILL_BASES[basis]
    kills = [e for e in rundir.log.of_kinds(SCREEN) if e.get("tag") == tag and e.get("decision") == "kill"]
    if not any(e.get("basis") == wanted for e in kills):
        found = ", ".join(f"{e.get('basis')}" for e in kills) or "none"
        # killed on the other ground: that basis, named (screening it again kills it on the same ground)
        supported = [
            b for b, ground in SCREEN_KILL_BASES.items() if any(e.get("basis") == ground for e in kills)
        ]
        way_on = (
            f"book the ground it was killed on: `{_book_reject(rundir, tag, supported[0])}`"
            if supported
            else f"Screen it ({evaluating(rundir, tag, '--capevolve-screen 1')}) or give the basis the "
            "record supports"
        )
        raise CommitRefused(
            f"--reject-basis {basis} needs a screen that killed {tag!r} on {wanted}; its screen kills: "
            f"{found}. {way_on[0].upper()}{way_on[1:]}"
        )


def check_infra(spec: Spec, rundir: RunDir, tag: str) -> None:
    """A reject on basis ``infra`` needs a logged infra error of one of ``tag``'s rollouts."""
    rollouts = [e for e in rundir.log.of_kinds(ROLLOUT) if e.get("tag") == tag and e.get("split") != "test"]
    errors = sum(1 for e in rollouts if e.get("infra_error"))
    if errors == 0:
        raise CommitRefused(
            f"--reject-basis infra needs an infra error in the log; the {len(rollouts)} logged rollout(s) "
            f"of {tag!r} have none: give the basis the record supports (gate, after a gate session)"
        )


def check_budget(spec: Spec, rundir: RunDir, tag: str) -> None:
    """A reject on basis ``budget`` needs the ceilings to leave no room for one more full-val evaluation;
    while one fits, rejecting is a choice, not the budget's."""
    from ..budget.spend import spend_report  # here: the spend report reads the whole run

    report = spend_report(spec, rundir, n_siblings=1)
    if report["budget_exhausted"] or not report["afford"]["affordable"]:
        return
    raise CommitRefused(
        f"--reject-basis budget needs the ceilings to leave no room for one more evaluation; "
        f"capevolve spend says one fits ({report['afford']['rollouts_needed']} rollouts under every "
        f"ceiling): gate {tag!r}, or give the basis the record supports"
    )


def said_by_the_verdict(basis: str) -> Callable[[Spec, RunDir, str], None]:
    """A reject on ``basis`` (a microcase's, a repeat's) needs a verdict of ``tag`` on that basis: a
    session books it from one; by hand it would label a refuted edit as never measured."""

    def check(spec: Spec, rundir: RunDir, tag: str) -> None:
        verdict = rundir.verdicts.verdict(tag)
        if verdict is not None and verdict.get("basis") == basis:
            return
        if verdict is None:
            way_on = f"gate it, which books what it decides: {evaluating(rundir, tag, '--capevolve-gate')}"
        else:
            way_on = f"book what it decided: `{_book_reject(rundir, tag, _booked_basis(verdict))}`"
        said = "no verdict" if verdict is None else f"a verdict on basis {verdict.get('basis') or 'gate'}"
        raise CommitRefused(
            f"--reject-basis {basis} is booked from a verdict on that basis; {tag!r} has {said}: {way_on}"
        )

    return check


# Reject bases whose evidence is in the record; booked only when it is there (or with --force).
EVIDENCED_BASES: dict[str, Callable[[Spec, RunDir, str], None]] = {
    Basis.INFRA: check_infra,
    Basis.BUDGET: check_budget,
    Basis.MICRO_TEST_FAIL: said_by_the_verdict(Basis.MICRO_TEST_FAIL),
    Basis.REPEAT: said_by_the_verdict(Basis.REPEAT),
}
