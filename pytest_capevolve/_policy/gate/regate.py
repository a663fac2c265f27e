"""A verdict re-derived from a run's persisted val rollouts, as the session decided it.

An override that departs from the recorded settings asks a what-if: shown, marked as not the decision, never
an accept's exit. The session and ``capevolve gate`` judge the same evidence and take the same
:data:`VERDICT_PASSES`, so they cannot differ."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import partial
from typing import Any, cast

from ..._decide.alpha_budget import looks_record
from ..._decide.basis import Basis
from ..._decide.verdict import INDECISIVE, Verdict
from ..._project import way_on
from ..._project.spec import Spec
from ..._store.files import RunDirError
from ..._store.log import paid_by
from ..._store.log.event_kinds import VERDICT
from ..._store.memory.seal import Seal
from ..._store.readers.evidence import ByTag, first_outcomes, index_records, repaid_details
from ..._store.rundir import RunDir
from ..._store.snapshots import unknown_tag
from ...exitcodes import Refusal
from ..alpha.gate_settings import guards_of, guards_off, said, settings_of
from ..alpha.resolution import out_of_reach
from .judge import GATE_SPLIT, Prefer
from .verdicts import Evidence, gate_config, null_config


@dataclass(frozen=True)
class GateAsk:
    """What ``capevolve gate`` asks: the tag, an explicit parent, and the gate's overrides."""

    tag: str
    against: str | None = None
    gate_mode: str | None = None
    k_se: float | None = None
    alpha: float | None = None
    veto_regressions: bool = False


def val_evidence(spec: Spec, rundir: RunDir, val_ids: list[str]) -> Evidence:
    """The run's val evidence, each rollout at its first logged outcome."""
    by_tag = index_records(rundir.rollouts.indexed_rollouts(GATE_SPLIT))
    return first_evidence(spec, rundir, by_tag, val_ids, spec.num_trials)[0]


def first_evidence(
    spec: Spec, rundir: RunDir, by_tag: ByTag, task_ids: list[str], trials: int, prefer: Prefer | None = None
) -> tuple[Evidence, dict[str, int]]:
    """The evidence at each rollout's first logged outcome (a redraw is no new evidence), and the repaid."""
    by_tag, repaid = first_outcomes(rundir, by_tag, spec.success_threshold)
    return Evidence.of_run(spec, rundir, by_tag, task_ids, trials, prefer), repaid


def regate(spec: Spec, rundir: RunDir, val_ids: list[str], ask: GateAsk) -> Verdict:
    """The verdict of ``ask.tag`` against ``ask.against`` (default: the recorded parent, else the best);
    refused for an unknown tag or one gated against itself."""
    # derived only from rollouts a session claimed and paid once (:mod:`..._store.log.paid_by`)
    paid_by.refuse_untrusted(rundir.log.of_kinds(*paid_by.KINDS), rundir.run_id, rundir.rollout_file)
    recorded, unsure = _recorded(rundir, ask.tag)
    against = _against(rundir, ask, recorded)
    # the recorded decision is re-derived as decided, unless another parent is asked for
    same_parent = not ask.against or (recorded is not None and ask.against == recorded.get("against"))
    as_decided = recorded if recorded is not None and same_parent else None
    null_tags: list[str] = list(as_decided.get("nulls", [])) if as_decided else []
    looks = _looks(as_decided)
    level = decided_level(as_decided)
    tags = [ask.tag, against, *(null_tags if looks is not None else [])]
    by_tag = index_records(rundir.rollouts.indexed_rollouts(GATE_SPLIT, tags))
    trials = int(as_decided["trials"]) if looks is not None and as_decided else spec.num_trials
    evidence, repaid = first_evidence(spec, rundir, by_tag, val_ids, trials)
    asked = partial(
        gate_config, spec, mode=ask.gate_mode, k_se=ask.k_se, veto_regressions=ask.veto_regressions
    )
    if looks is None:
        config = asked(alpha=ask.alpha)
        if level is not None and ask.alpha is None:  # the level it had: family share, look, schedule
            config = replace(config, alpha=level.alpha)
        nulls: list[Fraction | float | None] = []
        for null in null_tags:  # each as logged, as the candidate's: a forged floor is no decision's
            found, why = _recorded(rundir, null)
            nulls, unsure = nulls + ([_null_delta(found)] if found else []), unsure + why
    else:  # grown: at its pooled trials and its look's level; its null controls judged so too
        alpha = ask.alpha if ask.alpha is not None else Fraction(looks["decision_alpha"])
        max_looks = int(looks.get("max_looks", spec.grow_max_looks))
        config = asked(alpha=alpha, look=int(looks["look"]), max_looks=max_looks)
        nulls = [_null_delta(evidence.judge(t, against, null_config(config)).to_dict()) for t in null_tags]
    verdict = evidence.judge(ask.tag, against, config, [n for n in nulls if n is not None] or None)
    verdict = passed(Passing.as_recorded(spec, repaid, as_decided, ask), verdict)
    if level is not None and looks is None:
        verdict = _at_level(verdict, level, ask.alpha)
    departs = [*unsure, *departures(recorded, ask, level)]
    return _what_if(rundir, verdict, recorded, departs) if departs else verdict


def unjudged(rundir: RunDir, verdict: Verdict) -> str | None:
    """Why a coverage-indecisive answer for a tag no session judged is no verdict (its val rollouts are
    incomplete: a session cut off, or one that evaluated a subset), and the gate session that pays only
    the missing ones and judges it; None for a tag a session judged, or one whose evidence is whole."""
    if verdict.basis != Basis.COVERAGE or any(
        e.get("tag") == verdict.tag for e in rundir.log.of_kinds(VERDICT)
    ):
        return None
    finalized = Seal(rundir).closed() is not None  # closed to gates: the session is a new run's
    return way_on.unjudged(verdict.tag, rundir.run_id, rundir.project_dir, finalized=finalized)


def _recorded(rundir: RunDir, tag: str) -> tuple[dict[str, Any] | None, list[str]]:
    """``tag``'s verdict as the gate logged it (held to its sha256), and why none can be read as
    decided: a file deleted or edited while the log records its verdict (its level, its nulls are
    in the file alone), so what is derived without it is a what-if, never the decision."""
    if rundir.verdicts.verdict(tag) is not None:
        with contextlib.suppress(RunDirError):
            return rundir.verdicts.checked(tag), []
    logged = [e for e in rundir.log.of_kinds(VERDICT) if e.get("tag") == tag]
    if not logged:
        return None, []
    event = logged[-1]
    state = "is not the one" if rundir.verdicts.verdict_path(tag).is_file() else "is gone, not the one"
    return None, [
        f"verdicts/{tag}.json {state} the gate wrote (event seq {event.get('seq')}: {event.get('decision')}, "
        f"p = {event.get('p_value')}), so the level and nulls it was decided with are unknown"
    ]


def _against(rundir: RunDir, ask: GateAsk, recorded: dict[str, Any] | None) -> str:
    against: str = ask.against or (recorded["against"] if recorded else rundir.state.best())
    known = set(rundir.snapshots.known_tags())
    for tag in (ask.tag, against):
        if tag not in known:
            raise Refusal(unknown_tag(tag, rundir.run_id, known, rundir.project_dir))
    if ask.tag == against:
        raise Refusal(f"{ask.tag!r} would be gated against itself; give --against another tag")
    return against


def _at_level(verdict: Verdict, level: DecidedLevel, alpha: float | None) -> Verdict:
    """The verdict re-derived at its decision's level (or at ``--alpha``, said so)."""
    at_it = alpha is None or Fraction(str(alpha)) == level.alpha
    if alpha is None:
        note = f"at the level this decision had ({level.text})"
    else:
        note = "" if at_it else f"--alpha {alpha:g} asked: not the level this decision had ({level.text})"
    record = {"alpha": str(level.alpha), "how": level.text, "this_answer_at_it": at_it}
    return replace(
        verdict,
        reason=f"{verdict.reason}; {note}" if note else verdict.reason,
        details={**verdict.details, "decided_level": record},
    )


def _what_if(
    rundir: RunDir, verdict: Verdict, recorded: dict[str, Any] | None, departs: list[str]
) -> Verdict:
    tag, booked = verdict.tag, booked_decision(rundir, verdict.tag)
    decided = (
        f"the decision booked on {tag!r} is {booked}"
        if booked
        else f"its verdict says {recorded.get('decision')} (no decision booked)"
        if recorded
        else "no decision is booked on it"
    )
    again = (
        f"`capevolve gate` does not replay a sequential decision: verdicts/{tag}.json holds it"
        if ((recorded or {}).get("details") or {}).get("sequential")
        else f"`capevolve gate {tag}` without them re-derives the decision"
    )
    line = (
        f"WHAT-IF, not the decision: {'; '.join(departs)} depart from the settings {tag!r} was "
        f"decided under; {decided}, and this answer changes nothing ({again})"
    )
    what_if = {"answer": verdict.decision, "departs": departs, "booked": booked, "line": line}
    return replace(
        verdict,
        reason=f"WHAT-IF, not the decision — answer {verdict.decision}: {verdict.reason}",
        details={**verdict.details, "what_if": what_if},
    )


def departures(recorded: dict[str, Any] | None, ask: GateAsk, level: DecidedLevel | None) -> list[str]:
    """The overrides of ``ask`` that depart from the settings ``recorded`` was decided under."""
    if recorded is None:
        return []
    found = []
    sequential = (recorded.get("details") or {}).get("sequential")
    if sequential:  # an anytime stop on a prefix: the fixed-n gate on what exists is not its rule
        found.append(
            f"the fixed-n gate over the rollouts that exist (the decision: sequential, "
            f"{recorded.get('decision')} by {recorded.get('basis')} after {sequential.get('tasks_seen')} "
            f"of {sequential.get('tasks_total')} tasks)"
        )
    if ask.against and ask.against != recorded.get("against"):
        found.append(f"--against {ask.against} (the decision: against {recorded.get('against')!r})")
    if ask.gate_mode and ask.gate_mode != recorded.get("mode"):
        found.append(f"--gate-mode {ask.gate_mode} (the decision: {recorded.get('mode')})")
    if ask.k_se is not None and ask.k_se != recorded.get("k_se"):
        found.append(f"--k-se {ask.k_se:g} (the decision: {recorded.get('k_se')})")
    if ask.alpha is not None:
        had = level.alpha if level is not None else recorded.get("alpha")
        if had is None or Fraction(str(ask.alpha)) != Fraction(str(had)):
            shown = level.text if level is not None else f"α = {had}"
            found.append(f"--alpha {ask.alpha:g} (the decision: {shown})")
    if ask.veto_regressions and not (recorded.get("details") or {}).get("veto_regressions"):
        found.append("--veto-regressions (the decision did not veto regressions)")
    return found


def booked_decision(rundir: RunDir, tag: str) -> str | None:
    booked = None
    for event in rundir.decisions():
        if event.get("tag") == tag and isinstance(event.get("decision"), str):
            booked = str(event["decision"])
    return booked


@dataclass(frozen=True)
class DecidedLevel:
    """The α a recorded verdict was decided at, exactly, and how it came to be that."""

    alpha: Fraction
    text: str  # "α = 0.01667, Holm over 3 siblings"


def decided_level(recorded: dict[str, Any] | None) -> DecidedLevel | None:
    """The level ``recorded`` was decided at: a round's family share when it has one, else the α it
    records. None when it records none (a legacy mode, an indecisive verdict)."""
    if not recorded or recorded.get("mode") != "exact":
        return None
    family = (recorded.get("details") or {}).get("family") or {}
    if family.get("level_exact"):
        alpha = Fraction(str(family["level_exact"]))
        method = {"holm": "Holm", "bh": "Benjamini-Hochberg"}.get(str(family.get("method")), "each")
        how = f"{method} over {family.get('siblings')} siblings"
        return DecidedLevel(alpha, f"α = {float(alpha):.4g}, {how}")
    if isinstance(recorded.get("alpha"), float):
        alpha = _exact(recorded["alpha"])
        return DecidedLevel(alpha, f"α = {float(alpha):.4g}, as recorded")
    return None


def _exact(level: float) -> Fraction:
    """The α a verdict records as a float, as the simplest fraction that is that float."""
    simple = Fraction(level).limit_denominator(10**9)
    return simple if float(simple) == level else Fraction(level)


def _null_delta(verdict: dict[str, Any]) -> Fraction | float | None:
    exact = verdict.get("delta_exact")
    return Fraction(exact) if isinstance(exact, str) else verdict.get("delta_mean")


def _looks(recorded: dict[str, Any] | None) -> dict[str, Any] | None:
    looks: dict[str, Any] = ((recorded or {}).get("details") or {}).get("looks") or {}
    return looks if int(looks.get("look", 1)) > 1 else None


@dataclass(frozen=True)
class Passing:
    """What the verdict passes read beside the verdict."""

    spec: Spec
    repaid: Mapping[str, int]
    looked: Mapping[str, int] = field(default_factory=dict)  # tag → the seq of its counted first look
    labels: Mapping[str, dict[str, Any]] | None = None
    overridden: tuple[tuple[str, str], ...] = ()
    schedule_why: str | None = None
    veto_regressions: bool = False
    grown: dict[str, Any] | None = None  # a grown verdict's looks record, kept as its grow wrote it

    @classmethod
    def as_recorded(
        cls, spec: Spec, repaid: Mapping[str, int], recorded: dict[str, Any] | None, ask: GateAsk
    ) -> Passing:
        """``capevolve gate``'s: what the session passed ``recorded`` with, read back from it."""
        details = (recorded or {}).get("details") or {}
        looks, label = details.get("looks") or {}, details.get("fresh_val") or details.get("harness_changed")
        counted = looks.get("counted_look")
        return cls(
            spec,
            repaid,
            {ask.tag: int(counted)} if counted is not None else {},
            {ask.tag: label} if label else None,
            tuple((details.get("overridden") or {}).items()),
            details.get("alpha_schedule_why"),
            ask.veto_regressions or bool(details.get("veto_regressions")),
            _looks(recorded) if counted is None else None,
        )


def _looked(passing: Passing, verdict: Verdict) -> Verdict:
    if passing.grown:  # decided at a later look by a grow (_session/grow.py), which wrote its record
        return replace(verdict, details={**verdict.details, "looks": passing.grown})
    return with_looks(passing.spec, verdict, 1, counted=passing.looked.get(verdict.tag))


def _veto(verdict: Verdict, veto: bool) -> Verdict:
    """Recorded, so `capevolve gate --veto-regressions` re-derives, not a what-if."""
    return replace(verdict, details={**verdict.details, "veto_regressions": True}) if veto else verdict


def _repaid(verdict: Verdict, repaid: Mapping[str, int]) -> Verdict:
    details = repaid_details(dict(repaid), verdict.tag, verdict.against)
    return replace(verdict, details={**verdict.details, **details})


VerdictPass = Callable[[Passing, Verdict], Verdict]
# The passes every judged verdict takes, in order, in the session (_session/gating.py) and in
# ``capevolve gate`` (:func:`regate`): the one list, so the two cannot answer differently.
VERDICT_PASSES: tuple[tuple[str, VerdictPass], ...] = (
    ("looks", _looked),
    ("resolution", lambda p, v: out_of_reach(v)),
    ("settings", lambda p, v: with_settings(p.spec, v, p.overridden, p.schedule_why)),
    ("label", lambda p, v: with_label(v, p.labels)),
    ("veto", lambda p, v: _veto(v, p.veto_regressions)),
    ("repaid", lambda p, v: _repaid(v, p.repaid)),
)
NULL_PASSES = tuple((name, step) for name, step in VERDICT_PASSES if name in ("settings", "repaid"))


def passed(
    passing: Passing, verdict: Verdict, passes: tuple[tuple[str, VerdictPass], ...] | None = None
) -> Verdict:
    """``verdict`` after ``passes`` (default :data:`VERDICT_PASSES`), in order."""
    for _, step in VERDICT_PASSES if passes is None else passes:
        verdict = step(passing, verdict)
    return verdict


def with_label(verdict: Verdict, labels: Mapping[str, dict[str, Any]] | None) -> Verdict:
    """The verdict with its harness-changed (or fresh-val) label, in its details and as a warning."""
    label = (labels or {}).get(verdict.tag)
    if not label:
        return verdict
    key = "fresh_val" if label.get("fresh_val") else "harness_changed"
    booked = f"{label['label']}: run {label['earlier_run']} booked {label['earlier_decision']}"
    if key == "fresh_val":
        level = decided_level(verdict.to_dict())
        at = f" ({label['earlier_level']})" if label.get("earlier_level") else ""
        here = level.text if level else "this run's level"
        said_line = f"{booked}{at} on these bytes as {label['earlier_tag']!r}; judged here at {here}"
    else:
        differs = ", ".join(label["harness_changes"][:3])
        said_line = f"{booked} on these bytes as {label['earlier_tag']!r}; the harness differs ({differs})"
    details = {**verdict.details, key: dict(label)}
    return replace(verdict, details=details, warnings=[*verdict.warnings, said_line])


def with_settings(
    spec: Spec, verdict: Verdict, overrides: tuple[tuple[str, str], ...], schedule_why: str | None = None
) -> Verdict:
    """The verdict with the gate settings it was decided under, warning of those from the command line."""
    details = {**verdict.details, "gate_settings": settings_of(spec), "overridden": dict(overrides)}
    details["guards"] = guards_of(spec)
    if schedule_why:
        details["alpha_schedule_why"] = schedule_why
    lines = (said(dict(overrides)) if overrides else None, guards_off(spec), schedule_why)
    return replace(verdict, details=details, warnings=[*verdict.warnings, *filter(None, lines)])


def with_looks(spec: Spec, verdict: Verdict, look: int, counted: int | None = None) -> Verdict:
    """The verdict with its look and the α schedule across looks. ``counted``: the seq of the tag's verdict
    that was its look 1."""
    if counted is None:
        record = looks_record(spec.gate_alpha, look, spec.grow_max_looks)
        return replace(verdict, details={**verdict.details, "looks": record})
    record = {**looks_record(spec.gate_alpha, look + 1, max(2, spec.grow_max_looks)), "counted_look": counted}
    said_line = (
        f"the second look at {verdict.tag!r} against {verdict.against!r}: its first verdict decided "
        f"nothing (indecisive by coverage, verdict event seq {counted}) yet showed the data, so it "
        "counted as look 1 and this gate is taken at look 2's level"
    )
    return replace(
        verdict, details={**verdict.details, "looks": record}, warnings=[*verdict.warnings, said_line]
    )


def counted_looks(rundir: RunDir, tags: list[str], against: str) -> dict[str, int]:
    """Tag → the seq of its first verdict against ``against`` that was indecisive by coverage and showed a
    Δ̄ (a look that counts)."""
    wanted = set(tags)
    found: dict[str, int] = {}
    for event in rundir.log.of_kinds(VERDICT):
        tag = event.get("tag")
        if (
            tag in wanted
            and tag not in found
            and event.get("against") == against
            and event.get("decision") == INDECISIVE
            and event.get("basis") == Basis.COVERAGE
            and event.get("delta_mean") is not None
        ):
            found[str(tag)] = int(cast(int, event.get("seq", 0)))  # every line has a seq
    return found
