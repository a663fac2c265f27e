"""A verdict re-derived from a run's persisted val rollouts, as the session decided it.

Used by ``capevolve gate`` (pays no rollout) and by anything else that asks again what a gate
said: an ordinary verdict is re-judged against the spec's gate with its recorded null controls;
a *grown* verdict (one decided at look > 1 of :mod:`.._decide.looks`) is re-judged as it was
decided — at its pooled trials, at its look's α, with its null controls judged at the pooled
trials too. Lives here, below the CLI, so the rule of re-derivation is one rule with the
session's.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .._decide.verdict import Verdict
from .._project.spec import Spec
from .._store.evidence import index_records
from .._store.rundir import RunDir
from . import Refusal
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
    return Evidence(by_tag, val_ids, trials or spec.num_trials, rundir.snapshots.snapshot_size)


def regate(spec: Spec, rundir: RunDir, val_ids: list[str], ask: GateAsk) -> Verdict:
    """The verdict of ``ask.tag`` against ``ask.against`` (default: the recorded parent, else
    the best). Refused (:class:`.Refusal`) for an unknown tag or a tag gated against itself."""
    recorded = rundir.verdicts.verdict(ask.tag)
    against = ask.against or (recorded["against"] if recorded else rundir.state.best())
    known = set(rundir.snapshots.known_tags())
    for tag in (ask.tag, against):
        if tag not in known:
            raise Refusal(f"unknown tag {tag!r} in run {rundir.run_id}; known: {', '.join(sorted(known))}")
    if ask.tag == against:
        raise Refusal(f"{ask.tag!r} would be gated against itself; give --against another tag")
    # the recorded decision is re-derived as decided, unless another parent is asked for
    as_decided = recorded if recorded is not None and not ask.against else None
    null_tags: list[str] = list(as_decided.get("nulls", [])) if as_decided else []
    looks = _looks(as_decided)
    if looks is None:
        evidence = val_evidence(spec, rundir, val_ids, None, [ask.tag, against])
        config = gate_config(
            spec, mode=ask.gate_mode, k_se=ask.k_se, alpha=ask.alpha, veto_regressions=ask.veto_regressions
        )
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
        )
        nulls = [_null_delta(evidence.judge(t, against, config).to_dict()) for t in null_tags]
    return evidence.judge(ask.tag, against, config, [n for n in nulls if n is not None] or None)


def _null_delta(verdict: dict[str, Any]) -> Fraction | float | None:
    """A null's Δ̄ as the null floor compares it: the exact fraction its verdict recorded."""
    exact = verdict.get("delta_exact")
    return Fraction(exact) if isinstance(exact, str) else verdict.get("delta_mean")


def _looks(recorded: dict[str, Any] | None) -> dict[str, Any] | None:
    """A grown verdict's looks record (decided at look > 1), else None."""
    looks: dict[str, Any] = ((recorded or {}).get("details") or {}).get("looks") or {}
    return looks if int(looks.get("look", 1)) > 1 else None
