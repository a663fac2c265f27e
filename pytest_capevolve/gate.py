"""Decision rules built on :mod:`stats`: candidate vs best on val → a verdict with its numbers.

Pure: arrays in, a plain-data :class:`Verdict` out. Nothing here reads the run dir, so the
same verdict can be re-derived by ``capevolve gate`` from persisted rollouts at any time.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from . import stats

ACCEPT, REJECT, INDECISIVE = "accept", "reject", "indecisive"
LEGACY_MODES = ("paired", "significant", "strict", "threshold", "simplicity_tiebreak")


class GateSplitError(ValueError):
    """Raised when anything but val is gated on: train is what the search edits against and
    test is sealed."""


@dataclass(frozen=True)
class GateConfig:
    mode: str = "exact"
    alpha: float = 0.05
    k_se: float = 1.0
    threshold: float = 0.0
    min_coverage: float = 0.8
    veto_regressions: bool = False
    success_threshold: float = 1.0
    seed: int = 0


@dataclass
class Verdict:
    tag: str
    against: str
    decision: str
    basis: str
    reason: str
    mode: str
    alpha: float | None
    k_se: float | None
    n_tasks: int
    trials: int
    delta_mean: float | None
    se: float | None
    ci: list[float] | None
    p_value: float | None
    p_exact: str | None
    p_method: str | None
    bar: float | None
    null_spread: float | None
    coverage: dict[str, float]
    min_coverage: float
    footprint: list[str]
    regressions: list[dict[str, Any]]
    infra_errors: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    per_task: dict[str, dict[str, float | None]] = field(default_factory=dict)
    split: str = "val"
    details: dict[str, Any] = field(default_factory=dict)  # what a refusal was decided on

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def refusal(
    *,
    tag: str,
    against: str,
    decision: str,
    basis: str,
    reason: str,
    config: GateConfig,
    details: dict[str, Any],
) -> Verdict:
    """A verdict reached before any rollout (tamper → indecisive, a failed microcase →
    reject): no numbers, because none were paid for; ``details`` holds what it rests on."""
    return Verdict(
        tag=tag,
        against=against,
        decision=decision,
        basis=basis,
        reason=reason,
        mode=config.mode,
        alpha=None,
        k_se=None,
        n_tasks=0,
        trials=0,
        delta_mean=None,
        se=None,
        ci=None,
        p_value=None,
        p_exact=None,
        p_method=None,
        bar=None,
        null_spread=None,
        coverage={},
        min_coverage=config.min_coverage,
        footprint=[],
        regressions=[],
        infra_errors={},
        details=details,
    )


def regressions(
    candidate: np.ndarray, best: np.ndarray, task_ids: list[str], success_threshold: float
) -> list[dict[str, Any]]:
    """Tasks the best passed (most trials at or above the threshold) whose mean dropped by
    more than their own noise: twice the SE of the per-task difference (any drop when both
    arms were constant)."""
    cand_means, best_means = stats.task_means(candidate), stats.task_means(best)
    noise = 2 * np.sqrt(stats.task_stderrs(candidate) ** 2 + stats.task_stderrs(best) ** 2)
    # at least half of the best's valid trials at the threshold (nan compares False), counted in
    # integers; a task with no valid trial on either side has a nan drop, which is never a hit
    best_passed = 2 * np.sum(best >= success_threshold, axis=1) >= np.sum(~np.isnan(best), axis=1)
    drop = best_means - cand_means
    hit = best_passed & (drop > noise)  # noise ≥ 0, so only a drop can be a hit
    return [
        {
            "task_id": task_ids[i],
            "best": float(best_means[i]),
            "candidate": float(cand_means[i]),
            "drop": float(drop[i]),
            "noise": float(noise[i]),
        }
        for i in np.flatnonzero(hit)
    ]


def decide(
    candidate: np.ndarray,
    best: np.ndarray,
    *,
    tag: str,
    against: str,
    task_ids: list[str],
    config: GateConfig,
    split: str = "val",
    null_deltas: list[float] | None = None,
    infra_errors: dict[str, int] | None = None,
    candidate_size: int | None = None,
    best_size: int | None = None,
) -> Verdict:
    """Gate ``candidate`` against ``best``: two tasks × trials reward matrices (nan = missing).

    Order of reasons: split guard → coverage (indecisive) → the mode's rule → null floor →
    regression veto → error-rate imbalance (indecisive when imputation would flip it).
    """
    if split != "val":
        raise GateSplitError(f"the gate reads only the val split; refusing to gate on {split!r}")
    candidate, best = stats.as_matrix(candidate), stats.as_matrix(best)
    stats.check_rewards(candidate)
    stats.check_rewards(best)
    infra = dict(infra_errors or {"candidate": 0, "best": 0})
    deltas, mask = stats.paired_deltas(candidate, best)
    n = int(deltas.size)
    cov = {
        "candidate": stats.coverage(candidate),
        "best": stats.coverage(best),
        "paired": float(np.mean(mask)) if mask.size else 0.0,
    }
    delta_mean, se = stats.mean_se(deltas)
    used_ids = [t for t, m in zip(task_ids, mask, strict=True) if m]
    cand_means, best_means = stats.task_means(candidate), stats.task_means(best)
    per_task = {
        t: {
            "candidate": _nan_none(cand_means[i]),
            "best": _nan_none(best_means[i]),
            "delta": _nan_none(cand_means[i] - best_means[i]),
        }
        for i, t in enumerate(task_ids)
    }
    footprint = [t for t, d in zip(used_ids, deltas, strict=True) if d != 0]
    regs = regressions(candidate, best, task_ids, config.success_threshold)
    spread = max((abs(d) for d in null_deltas), default=None) if null_deltas else None
    base = dict(
        tag=tag,
        against=against,
        mode=config.mode,
        alpha=config.alpha if config.mode == "exact" else None,
        k_se=config.k_se if config.mode in ("paired", "significant") else None,
        n_tasks=n,
        trials=int(candidate.shape[1]) if candidate.ndim == 2 else 1,
        delta_mean=delta_mean,
        se=se,
        ci=None,
        p_value=None,
        p_exact=None,
        p_method=None,
        bar=None,
        null_spread=spread,
        coverage=cov,
        min_coverage=config.min_coverage,
        footprint=footprint,
        regressions=regs,
        infra_errors=infra,
        per_task=per_task,
        split=split,
    )
    if n == 0 or cov["paired"] < config.min_coverage:
        shown = "no task valid on both sides" if n == 0 else f"paired coverage {cov['paired']:.0%}"
        return Verdict(
            **base,
            decision=INDECISIVE,
            basis="coverage",
            reason=f"{shown} is below min_coverage {config.min_coverage:.0%}: could not judge",
        )
    ci = stats.bootstrap_ci(deltas, seed=config.seed)
    base["ci"] = None if ci is None else [ci[0], ci[1]]
    decision, basis, reason, extra = _rule(candidate, best, deltas, config, candidate_size, best_size)
    base.update(extra)
    if decision == ACCEPT and spread is not None and not (delta_mean or 0.0) > spread:
        decision, basis = REJECT, "null_floor"
        reason = (
            f"Δ̄ = {delta_mean:+.4f} does not exceed the null controls' own spread "
            f"{spread:.4f}, so it cannot be told from re-running the best"
        )
        base["bar"] = max(base["bar"] or 0.0, spread)
    elif spread is not None:
        base["bar"] = max(base["bar"] or 0.0, spread)
    if decision == ACCEPT and config.veto_regressions and regs:
        decision, basis = REJECT, "regression_veto"
        reason = (
            f"vetoed: {len(regs)} task(s) the best passed dropped by more than their own "
            f"noise ({', '.join(r['task_id'] for r in regs[:5])})"
        )
    if infra.get("candidate", 0) != infra.get("best", 0):
        flipped = _imputation_flips(candidate, best, decision, config, candidate_size, best_size)
        if flipped:
            decision, basis = INDECISIVE, "error_imbalance"
            reason = (
                f"infra errors differ between the arms ({infra.get('candidate', 0)} vs "
                f"{infra.get('best', 0)}) and worst-case imputation of the missing trials "
                f"would flip the decision: could not judge"
            )
    return Verdict(**base, decision=decision, basis=basis, reason=reason)


def _nan_none(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _rule(
    candidate: np.ndarray,
    best: np.ndarray,
    deltas: np.ndarray,
    config: GateConfig,
    candidate_size: int | None,
    best_size: int | None,
) -> tuple[str, str, str, dict[str, Any]]:
    mode = config.mode
    mean = float(np.mean(deltas))
    if mode == "exact":
        result = stats.sign_flip_test(candidate, best, alpha=config.alpha, seed=config.seed)
        ok = result.at_most(config.alpha)
        extra = {
            "p_value": result.p_value,
            "p_method": result.method,
            "p_exact": f"{result.numerator}/{result.denominator}",
            "bar": None,
        }
        word = "≤" if ok else ">"
        reason = (
            f"one-sided paired sign-flip test over {deltas.size} tasks: p = "
            f"{result.p_value:.4g} {word} α = {config.alpha} (Δ̄ = {mean:+.4f})"
        )
        return _outcome(ok), "exact", reason, extra
    if mode == "paired":
        se = stats.mean_se(deltas)[1] or 0.0  # one task: SE undefined, treated as 0 (warned)
        decision, basis, reason, extra = _k_se_rule(
            "paired", "paired Δ̄", mean, se, config.k_se, f"SE = {se:.4f}, n = {deltas.size}"
        )
        return decision, basis, reason, {**extra, "se": se}
    arm_delta = float(np.nanmean(stats.task_means(candidate)) - np.nanmean(stats.task_means(best)))
    if mode == "significant":
        se = math.sqrt(stats.combined_se(candidate) ** 2 + stats.combined_se(best) ** 2)
        decision, basis, reason, extra = _k_se_rule(
            "significant", "Δ", arm_delta, se, config.k_se, f"combined SE = {se:.4f}"
        )
        return decision, basis, reason, {**extra, "se": se}
    if mode == "threshold":
        ok = arm_delta > config.threshold
        return (
            _outcome(ok),
            "threshold",
            f"Δ = {arm_delta:+.4f} {'>' if ok else '≤'} threshold {config.threshold}",
            {"bar": config.threshold},
        )
    if mode == "strict":
        ok = arm_delta > 0
        return (
            _outcome(ok),
            "strict",
            f"Δ = {arm_delta:+.4f} {'>' if ok else '≤'} 0",
            {"bar": 0.0},
        )
    if mode == "simplicity_tiebreak":
        if arm_delta > 0:
            return ACCEPT, "simplicity_tiebreak", f"Δ = {arm_delta:+.4f} > 0", {"bar": 0.0}
        tie = abs(arm_delta) <= 1e-9
        if tie and candidate_size is not None and best_size is not None and candidate_size < best_size:
            return (
                ACCEPT,
                "simplicity_tiebreak",
                f"tie (Δ = {arm_delta:+.4f}); the smaller candidate wins ({candidate_size} < "
                f"{best_size} bytes)",
                {"bar": 0.0},
            )
        return REJECT, "simplicity_tiebreak", f"Δ = {arm_delta:+.4f} ≤ 0 and no simpler tie", {"bar": 0.0}
    raise ValueError(f"unknown gate mode {mode!r}; use exact or one of {', '.join(LEGACY_MODES)}")


def _k_se_rule(
    basis: str, label: str, delta: float, se: float, k_se: float, detail: str
) -> tuple[str, str, str, dict[str, Any]]:
    """cap-evolve's "delta > k·SE"; an SE of 0 falls back to strict (delta > 0), with a warning
    kept in the verdict, since a zero SE means the rule cannot tell noise from signal."""
    if se == 0.0:
        ok = delta > 0
        return (
            _outcome(ok),
            basis,
            f"{label} = {delta:+.4f} {'>' if ok else '≤'} 0 (WARNING: SE = 0, so the rule fell back "
            "to strict: any improvement wins)",
            {"bar": 0.0, "warnings": [f"{basis} SE = 0: strict fallback"]},
        )
    bar = k_se * se
    ok = delta > bar
    return (
        _outcome(ok),
        basis,
        f"{label} = {delta:+.4f} {'>' if ok else '≤'} {k_se}·SE = {bar:.4f} ({detail})",
        {"bar": bar},
    )


def _outcome(ok: bool) -> str:
    return ACCEPT if ok else REJECT


def _imputation_flips(
    candidate: np.ndarray,
    best: np.ndarray,
    decision: str,
    config: GateConfig,
    candidate_size: int | None,
    best_size: int | None,
) -> bool:
    """Would filling the missing trials against the decision change it?"""
    if decision == ACCEPT:  # candidate's missing trials fail, best's succeed
        cand, bst = np.nan_to_num(candidate, nan=0.0), np.nan_to_num(best, nan=1.0)
    else:
        cand, bst = np.nan_to_num(candidate, nan=1.0), np.nan_to_num(best, nan=0.0)
    deltas, _ = stats.paired_deltas(cand, bst)  # every task: decide() got here with n > 0
    imputed, *_ = _rule(cand, bst, deltas, config, candidate_size, best_size)
    return imputed != decision
