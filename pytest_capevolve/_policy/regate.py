"""A verdict re-derived from a run's persisted val rollouts, as the session decided it.

Used by ``capevolve gate`` (pays no rollout) and by anything else that asks again what a gate
said: an ordinary verdict is re-judged against the spec's gate with its recorded null controls;
a *grown* verdict (one decided at look > 1 of :mod:`.._decide.looks`) is re-judged as it was
decided — at its pooled trials, at its look's α, with its null controls judged at the pooled
trials too. Lives here, below the CLI, so the rule of re-derivation is one rule with the
session's.

An override that departs from the recorded decision's settings (another ``--against``, gate
mode, ``k_se``, α, a regression veto it did not have) asks a **what-if**: its answer is computed
and shown, marked as not the decision (:func:`departures`, ``details["what_if"]``), and the CLI
exits with the what-if code, never with accept — a what-if is a question, not a way to a second
decision on the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from .._decide.verdict import Verdict
from .._project.spec import Spec
from .._store import paid_by
from .._store.evidence import index_records
from .._store.rundir import RunDir
from .._store.snapshots import unknown_tag
from ..exitcodes import Refusal
from .verdicts import GATE_SPLIT, Evidence, gate_config


@dataclass(frozen=True)
class GateAsk:
    """What ``capevolve gate`` asks: the tag, an explicit parent, and the gate's overrides."""

    tag: str
    against: str | None = None
    gate_mode: str | None = None
    k_se: float | None = None
    alpha: float | None = None
    veto_regressions: bool = False


def val_evidence(
    spec: Spec, rundir: RunDir, val_ids: list[str], trials: int | None = None, tags: list[str] | None = None
) -> Evidence:
    """The run's val evidence, of ``tags`` only when given (from the index: no rollout file is
    read), at ``trials`` trials (default the spec's)."""
    by_tag = index_records(rundir.rollouts.indexed_rollouts(GATE_SPLIT, tags))
    return Evidence.of_run(spec, rundir, by_tag, val_ids, trials or spec.num_trials)


def regate(spec: Spec, rundir: RunDir, val_ids: list[str], ask: GateAsk) -> Verdict:
    """The verdict of ``ask.tag`` against ``ask.against`` (default: the recorded parent, else
    the best). Refused (:class:`.Refusal`) for an unknown tag or a tag gated against itself."""
    # derived only from rollouts a session claimed and paid once (:mod:`.._store.paid_by`)
    paid_by.refuse_untrusted(rundir.log.of_kinds(*paid_by.KINDS), rundir.run_id)
    recorded = rundir.verdicts.verdict(ask.tag)
    against = ask.against or (recorded["against"] if recorded else rundir.state.best())
    known = set(rundir.snapshots.known_tags())
    for tag in (ask.tag, against):
        if tag not in known:
            raise Refusal(unknown_tag(tag, rundir.run_id, known))
    if ask.tag == against:
        raise Refusal(f"{ask.tag!r} would be gated against itself; give --against another tag")
    # the recorded decision is re-derived as decided, unless another parent is asked for
    same_parent = not ask.against or (recorded is not None and ask.against == recorded.get("against"))
    as_decided = recorded if recorded is not None and same_parent else None
    null_tags: list[str] = list(as_decided.get("nulls", [])) if as_decided else []
    looks = _looks(as_decided)
    level = decided_level(as_decided)
    if looks is None:
        evidence = val_evidence(spec, rundir, val_ids, None, [ask.tag, against])
        config = gate_config(
            spec, mode=ask.gate_mode, k_se=ask.k_se, alpha=ask.alpha, veto_regressions=ask.veto_regressions
        )
        if level is not None and ask.alpha is None:  # the level it had: family share, look, schedule
            config = replace(config, alpha=level.alpha)
        nulls = [_null_delta(v) for v in (rundir.verdicts.verdict(t) for t in null_tags) if v is not None]
    else:  # grown: at its pooled trials and its look's level; its null controls judged so too
        assert as_decided is not None
        tags = [ask.tag, against, *null_tags]
        evidence = val_evidence(spec, rundir, val_ids, as_decided["trials"], tags)
        alpha = ask.alpha if ask.alpha is not None else Fraction(looks["decision_alpha"])
        config = gate_config(
            spec,
            mode=ask.gate_mode,
            k_se=ask.k_se,
            alpha=alpha,
            veto_regressions=ask.veto_regressions,
            look=int(looks["look"]),
            max_looks=int(looks.get("max_looks", spec.grow_max_looks)),
        )
        nulls = [_null_delta(evidence.judge(t, against, config).to_dict()) for t in null_tags]
    verdict = evidence.judge(ask.tag, against, config, [n for n in nulls if n is not None] or None)
    if level is not None and looks is None:
        if ask.alpha is None:
            note = f"at the level this decision had ({level.text})"
        elif Fraction(str(ask.alpha)) != level.alpha:
            note = f"--alpha {ask.alpha:g} asked: not the level this decision had ({level.text})"
        else:
            note = ""
        at_it = ask.alpha is None or Fraction(str(ask.alpha)) == level.alpha
        record = {"alpha": str(level.alpha), "how": level.text, "this_answer_at_it": at_it}
        verdict = replace(
            verdict,
            reason=f"{verdict.reason}; {note}" if note else verdict.reason,
            details={**verdict.details, "decided_level": record},
        )
    departs = departures(recorded, ask, level)
    if departs:
        booked = booked_decision(rundir, ask.tag)
        line = what_if_line(ask.tag, departs, booked, recorded)
        what_if = {"answer": verdict.decision, "departs": departs, "booked": booked, "line": line}
        verdict = replace(
            verdict,
            reason=f"WHAT-IF, not the decision — answer {verdict.decision}: {verdict.reason}",
            details={**verdict.details, "what_if": what_if},
        )
    return verdict


def departures(recorded: dict[str, Any] | None, ask: GateAsk, level: DecidedLevel | None) -> list[str]:
    """The overrides of ``ask`` that depart from the settings ``recorded`` (the verdict the
    session wrote) was decided under, each as ``"--flag VALUE (the decision: ...)"``; empty when
    there is no recorded verdict (nothing was decided) or every override repeats its setting."""
    if recorded is None:
        return []
    found = []
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
    """The last decision the log booked on ``tag`` (None: a verdict with no decision booked)."""
    booked = None
    for event in rundir.decisions():
        if event.get("tag") == tag and isinstance(event.get("decision"), str):
            booked = str(event["decision"])
    return booked


def what_if_line(tag: str, departs: list[str], booked: str | None, recorded: dict[str, Any] | None) -> str:
    """The line a what-if answer is printed under: what departs, and what was decided."""
    decided = (
        f"the decision booked on {tag!r} is {booked}"
        if booked
        else f"its verdict says {(recorded or {}).get('decision')} (no decision booked)"
    )
    return (
        f"WHAT-IF, not the decision: {'; '.join(departs)} depart from the settings {tag!r} was "
        f"decided under; {decided}, and this answer changes nothing (`capevolve gate {tag}` "
        "without them re-derives the decision)"
    )


@dataclass(frozen=True)
class DecidedLevel:
    """The α a recorded verdict was decided at, exactly, and how it came to be that."""

    alpha: Fraction
    text: str  # "α = 0.01667, Holm over 3 siblings"


def decided_level(recorded: dict[str, Any] | None) -> DecidedLevel | None:
    """The level ``recorded`` (a verdict file) was decided at: a round's family share (Holm's
    α/k, ...) when it has one, else the α it records (its look's share, its schedule's α_j).
    None when it records none (a legacy mode, an indecisive verdict)."""
    if not recorded or recorded.get("mode") != "exact":
        return None
    family = (recorded.get("details") or {}).get("family") or {}
    if family.get("level_exact") or isinstance(family.get("level"), float):
        exact = family.get("level_exact")
        alpha = Fraction(str(exact)) if exact else _exact(family["level"])
        method = {"holm": "Holm", "bh": "Benjamini-Hochberg"}.get(str(family.get("method")), "each")
        how = f"{method} over {family.get('siblings')} siblings"
        return DecidedLevel(alpha, f"α = {float(alpha):.4g}, {how}")
    if isinstance(recorded.get("alpha"), float):
        alpha = _exact(recorded["alpha"])
        return DecidedLevel(alpha, f"α = {float(alpha):.4g}, as recorded")
    return None


def _exact(level: float) -> Fraction:
    """A level recorded only as a float (verdicts written before ``level_exact``): the simplest
    fraction that is that float (1/60 for 0.01666…), else the float's own value."""
    simple = Fraction(level).limit_denominator(10**9)
    return simple if float(simple) == level else Fraction(level)


def _null_delta(verdict: dict[str, Any]) -> Fraction | float | None:
    """A null's Δ̄ as the null floor compares it: the exact fraction its verdict recorded."""
    exact = verdict.get("delta_exact")
    return Fraction(exact) if isinstance(exact, str) else verdict.get("delta_mean")


def _looks(recorded: dict[str, Any] | None) -> dict[str, Any] | None:
    """A grown verdict's looks record (decided at look > 1), else None."""
    looks: dict[str, Any] = ((recorded or {}).get("details") or {}).get("looks") or {}
    return looks if int(looks.get("look", 1)) > 1 else None
