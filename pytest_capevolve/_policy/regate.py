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
    by_tag = index_records(rundir.indexed_rollouts(GATE_SPLIT, tags))
    return Evidence(by_tag, val_ids, trials or spec.num_trials, rundir.snapshot_size)


def regate(spec: Spec, rundir: RunDir, val_ids: list[str], ask: GateAsk) -> Verdict:
    """The verdict of ``ask.tag`` against ``ask.against`` (default: the recorded parent, else
    the best). Refused (:class:`.Refusal`) for an unknown tag or a tag gated against itself."""
    recorded = rundir.verdict(ask.tag)
    against = ask.against or (recorded["against"] if recorded else rundir.best())
    known = set(rundir.known_tags())
    for tag in (ask.tag, against):
        if tag not in known:
            raise Refusal(f"unknown tag {tag!r} in run {rundir.run_id}; known: {', '.join(sorted(known))}")
    if ask.tag == against:
        raise Refusal(f"{ask.tag!r} would be gated against itself; give --against another tag")
    looks: dict[str, Any] = ((recorded or {}).get("details") or {}).get("looks") or {}
    grown = recorded is not None and not ask.against and int(looks.get("look", 1)) > 1
    null_tags: list[str] = list((recorded or {}).get("nulls", [])) if recorded and not ask.against else []
    tags = [ask.tag, against, *(null_tags if grown else [])]
    evidence = val_evidence(spec, rundir, val_ids, recorded["trials"] if recorded and grown else None, tags)
    config = gate_config(
        spec,
        mode=ask.gate_mode,
        k_se=ask.k_se,
        alpha=ask.alpha if ask.alpha is not None or not grown else Fraction(looks["decision_alpha"]),
        veto_regressions=ask.veto_regressions,
        look=int(looks["look"]) if grown else 1,
    )
    if grown:  # the grow judged its null controls at the pooled trials too
        nulls = [evidence.judge(t, against, config).delta_mean for t in null_tags]
    else:
        nulls = [v["delta_mean"] for v in (rundir.verdict(t) for t in null_tags) if v is not None]
    return evidence.judge(ask.tag, against, config, [n for n in nulls if n is not None] or None)
