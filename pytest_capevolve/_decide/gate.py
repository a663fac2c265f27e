"""The gate: candidate vs best on val → a verdict with its numbers (:func:`decide`).

Pure: arrays in, a plain-data :class:`Verdict` out, so ``capevolve gate`` can re-derive it from persisted
rollouts. The rules are in :mod:`.rules` (``GATE_MODES`` re-exported here)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from .. import _stats as stats
from .._stats.arms import none_for_nan as _none_for_nan
from .alpha_budget import as_fraction
from .rules import (
    CHECKS,
    EXACT_P_MODES,
    GATE_MODES,
    CheckInput,
    RuleInput,
    RuleNumbers,
    alpha_text,
    less_margin,
    outcome,
    run_checks,
)
from .verdict import ACCEPT, INDECISIVE, REJECT, GateConfig, GateSplitError, Verdict

__all__ = [
    "ACCEPT", "GATE_MODES", "INDECISIVE", "REJECT", "GateConfig", "GateSplitError", "Verdict", "alpha_text",
    "decide", "regressions",
]  # fmt: skip


def regressions(
    candidate: np.ndarray | stats.ArmSummary,
    best: np.ndarray | stats.ArmSummary,
    task_ids: list[str],
    success_threshold: float,
) -> list[dict[str, Any]]:
    """Tasks the best passed whose mean dropped by more than twice the SE of the per-task difference (any
    drop when both arms were constant)."""
    arms = cand, best = stats.summarize(candidate), stats.summarize(best)
    # at least half of the best's valid trials at the threshold (nan compares False), counted in
    # integers; a task with no valid trial on either side has a nan drop, which is never a hit
    drop = best.means - cand.means
    # noise ≥ 0, so only a drop can be a hit: the candidate's per-task SEs (the one per-candidate
    # cost here) are computed on those tasks alone, row by row as task_stderrs does
    dropped = np.flatnonzero(best.passed(success_threshold) & (drop > 0))
    noise = 2 * np.sqrt(stats.task_stderrs(cand.matrix[dropped]) ** 2 + best.stderrs[dropped] ** 2)
    hit = drop[dropped] > noise
    return [
        _drop(arms, task_ids, i, drop=float(drop[i]), noise=float(task_noise))
        for i, task_noise in zip(dropped[hit].tolist(), noise[hit].tolist(), strict=True)
    ]


def _drop(
    arms: tuple[stats.ArmSummary, stats.ArmSummary], task_ids: list[str], i: int, **numbers: Any
) -> dict[str, Any]:
    """One regression's record: the task, both arms' means and ``numbers`` (its drop, its noise)."""
    return {
        "task_id": task_ids[i],
        "best": float(arms[1].means[i]),
        "candidate": float(arms[0].means[i]),
        **numbers,
    }


def _strict_regressions(
    arms: tuple[stats.ArmSummary, stats.ArmSummary], task_ids: list[str], only: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Every task the candidate scores lower than the best, on exact per-task means (a tie is no drop), in
    task order; ``only``: these tasks alone."""
    cand, best = arms
    valid = np.flatnonzero(~np.isnan(cand.means) & ~np.isnan(best.means)).tolist()
    exact = stats.exact_task_deltas(cand.matrix, best.matrix)
    wanted = None if only is None else set(only)
    return [
        _drop(arms, task_ids, i, drop=float(-d), drop_exact=str(-d), noise=None)
        for i, d in zip(valid, exact, strict=True)
        if d < 0 and (wanted is None or task_ids[i] in wanted)
    ]


def _guard_checks(
    arms: tuple[stats.ArmSummary, stats.ArmSummary], task_ids: list[str], guarded: Sequence[str]
) -> list[dict[str, Any]]:
    """Each stop_condition guard on this pair: held (X no lower, exactly), broken, or unmeasured."""
    broken = {r["task_id"]: r for r in _strict_regressions(arms, task_ids, guarded)}
    where = {t: i for i, t in enumerate(task_ids)}
    checks: list[dict[str, Any]] = []
    for task in guarded:
        i = where.get(task)
        if i is None:  # checked on val only (spend says so too): not this gate's to enforce
            checks.append({"task_id": task, "held": None, "note": "not a val task: unmeasured"})
        elif task in broken:
            checks.append({**broken[task], "held": False})
        else:
            cand, best = arms[0].means_or_none[i], arms[1].means_or_none[i]
            held = True if cand is not None and best is not None else None
            checks.append({"task_id": task, "best": best, "candidate": cand, "held": held})
    return checks


def _covered(arm: stats.ArmSummary) -> float:
    return float(np.mean(arm.counts > 0)) if arm.counts.size else 0.0


def decide(
    candidate: np.ndarray,
    best: np.ndarray,
    *,
    tag: str,
    against: str,
    task_ids: list[str],
    config: GateConfig,
    split: str = "val",
    null_deltas: Sequence[float | Fraction | str] | None = None,
    infra_errors: dict[str, int] | None = None,
    candidate_size: int | None = None,
    best_size: int | None = None,
    first_attempts: tuple[np.ndarray, np.ndarray] | None = None,
) -> Verdict:
    """Gate ``candidate`` against ``best``: two tasks × trials reward matrices (nan = missing). Order:
    split guard → coverage (indecisive) → the mode's rule → :data:`.rules.CHECKS`."""
    if split != "val":
        raise GateSplitError(f"the gate reads only the val split; refusing to gate on {split!r}")
    # one summary per arm: the best's is shared by every candidate gated against it
    arms = stats.summarize(candidate), stats.summarize(best)
    deltas, mask = stats.paired_means(*arms)
    spread_exact = stats.exact_spread(null_deltas) if null_deltas else None
    infra = dict(infra_errors or {"candidate": 0, "best": 0})
    given = {"tag": tag, "against": against, "split": split, "infra_errors": infra}
    measured = _measured(arms, (deltas, mask), spread_exact, task_ids, config, given)
    if deltas.size == 0 or measured.coverage["paired"] < config.min_coverage:
        shown = (
            "no task is valid on both sides: paired coverage 0%"
            if deltas.size == 0
            else f"paired coverage {measured.coverage['paired']:.0%}"
        )
        return replace(
            measured, reason=f"{shown} is below min_coverage {config.min_coverage:.0%}: could not judge"
        )
    se, ci, ci_method = _interval(deltas, mask, config, measured.se)
    measured = replace(measured, se=se)
    rule = RuleInput(arms[0].matrix, arms[1].matrix, deltas, config, candidate_size, best_size, arms)
    ruled = rule.run()
    facts = CheckInput(rule, measured, first_attempts)
    # the rule and its null floor: what a task left out is asked again; the vetoes come after
    floored = run_checks(facts, ruled, CHECKS[:1])
    decision, basis, reason, numbers = run_checks(facts, floored, CHECKS[1:])
    bar = numbers.get("bar")
    if measured.null_spread is not None:  # under a margin δ the floor is Δ̄ > δ + spread (bar δ before it)
        bar = max(bar or config.margin, measured.null_spread + config.margin)
    stable = _survives_dropping_any_task(rule, (facts.delta_exact, spread_exact), floored.decision, numbers)
    return replace(
        replace(measured, **numbers),  # the rule's numbers; the gate's own bar overrides its one
        decision=decision,
        basis=basis,
        reason=reason,
        ci=None if ci is None else [ci[0], ci[1]],
        ci_method=None if ci is None else ci_method,
        bar=bar,
        verdict_stable=stable,
        directionally_positive_but_inconclusive=floored.decision != ACCEPT
        and (measured.delta_mean or 0.0) > 0,
    )


def _measured(
    arms: tuple[stats.ArmSummary, stats.ArmSummary],
    paired: tuple[np.ndarray, np.ndarray],
    spread_exact: Fraction | None,
    task_ids: list[str],
    config: GateConfig,
    given: dict[str, Any],
) -> Verdict:
    deltas, mask = paired
    per_task = {  # built from whole columns: 10,000 tasks × 20 candidates stay cheap
        t: {"candidate": c, "best": b, "delta": d}
        for t, c, b, d in zip(
            task_ids,
            arms[0].means_or_none,
            arms[1].means_or_none,
            _none_for_nan(arms[0].means - arms[1].means),
            strict=True,
        )
    }
    if config.regression_rule == "strict":
        regs = _strict_regressions(arms, task_ids)
    else:
        regs = regressions(*arms, task_ids, config.success_threshold)
    delta_mean, se = stats.mean_se(deltas)
    delta_exact = stats.exact_mean_delta(arms[0].matrix, arms[1].matrix)
    matrix = arms[0].matrix
    return Verdict(
        decision=INDECISIVE,
        basis="coverage",
        reason="",
        mode=config.mode,
        alpha=float(config.alpha) if config.mode in EXACT_P_MODES else None,
        k_se=config.k_se if config.mode in ("paired", "significant") else None,
        n_tasks=int(deltas.size),
        trials=int(matrix.shape[1]) if matrix.ndim == 2 else 1,
        delta_mean=delta_mean,
        delta_exact=None if delta_exact is None else str(delta_exact),
        se=se,
        # the floor is decided on fractions (an exact tie never exceeds it); its float is for reading
        null_spread=None if spread_exact is None else float(spread_exact),
        null_spread_exact=None if spread_exact is None else str(spread_exact),
        coverage={
            "candidate": _covered(arms[0]),
            "best": _covered(arms[1]),
            "paired": float(np.mean(mask)) if mask.size else 0.0,
        },
        min_coverage=config.min_coverage,
        footprint=[task_ids[i] for i in np.flatnonzero(mask)[deltas != 0].tolist()],
        regressions=regs,
        regression_rule=config.regression_rule,
        guards=_guard_checks(arms, task_ids, config.guarded_tasks) if config.guarded_tasks else [],
        per_task=per_task,
        **given,
    )


def _interval(
    deltas: np.ndarray, mask: np.ndarray, config: GateConfig, se: float | None
) -> tuple[float | None, tuple[float, float] | None, str]:
    if not config.clusters:
        return se, stats.t_ci(deltas), stats.STUDENT_T
    from .._stats.clusters import cluster_mean_ci

    kept = [c for c, k in zip(config.clusters, mask.tolist(), strict=True) if k]
    cluster_se, ci = cluster_mean_ci(deltas, kept)
    return cluster_se, ci, "cluster_t"


STABILITY_CHECKS = 64  # distinct task outcomes tried at most; past that, stability is not computed


def _survives_dropping_any_task(
    rule: RuleInput, floor: tuple[Fraction | None, Fraction | None], decision: str, rule_numbers: RuleNumbers
) -> bool | None:
    """Would the rule (and the null floor) decide the same with any one task left out? One task of each
    kind (same pair of means) is dropped; None past :data:`STABILITY_CHECKS` kinds. ``floor``: exact Δ̄ and
    the nulls' spread."""
    arms, config = rule.summaries, rule.config
    cand_means, best_means = arms[0].means, arms[1].means
    valid = np.flatnonzero(~np.isnan(cand_means) & ~np.isnan(best_means))
    first = _first_of_each_pair(cand_means[valid], best_means[valid])  # one task of each kind
    if first.size > STABILITY_CHECKS:
        return None
    if valid.size == 1:
        return False  # dropping the only paired task leaves nothing to decide on
    all_deltas = cand_means[valid] - best_means[valid]
    mean_exact, spread = floor
    total = (mean_exact or Fraction(0)) * valid.size  # Σ of the exact per-task deltas
    bound = _exact_drop_bound(rule, rule_numbers)
    for j in sorted(int(j) for j in first):
        deltas = np.delete(all_deltas, j)  # the paired deltas with task valid[j] left out
        again = bound(j) if bound is not None else None
        if again is None:
            dropped = arms[0].without(int(valid[j])), arms[1].without(int(valid[j]))
            left = config
            if config.clusters:  # the left-out task leaves its cluster too
                kept = [c for i, c in enumerate(config.clusters) if i != int(valid[j])]
                left = replace(config, clusters=tuple(kept))
            cand, bst = dropped[0].matrix, dropped[1].matrix
            again = (
                replace(rule, candidate=cand, best=bst, deltas=deltas, config=left, arms=dropped)
                .run()
                .decision
            )
        if again == ACCEPT and spread is not None:  # the floor on the rest, in fractions
            left_out = stats.exact_task_deltas(arms[0].matrix, arms[1].matrix, rows=[int(valid[j])])
            if not stats.exceeds(less_margin((total - left_out[0]) / (valid.size - 1), config), spread):
                again = REJECT
        if again != decision:
            return False
    return True


def _exact_drop_bound(rule: RuleInput, rule_numbers: RuleNumbers) -> Callable[[int], str | None] | None:
    """The exact rule's decision with the j-th task left out, where the full p decides it, else None.

    With S the sum over the other tasks and d the left-out delta, p = ½·P(S ≥ obs − |d|) + ½·P(S ≥ obs +
    |d|) and the left-out p is P(S ≥ obs − d): d > 0 gives p ≤ p_left ≤ 2p, d < 0 gives 2p − 1 ≤ p_left ≤
    p, d = 0 changes nothing. The float p is within :data:`stats.EXACT_MARGIN` of the exact one."""
    arms, config = rule.summaries, rule.config
    if (
        config.mode != "exact"
        or rule_numbers.get("p_method") not in ("exact", "float_tail")
        or config.clusters
    ):
        return None  # (a left-out task changes its cluster's sum, not a sign of its own)
    grid = stats.reward_grid(arms[0].values, arms[1].values)
    if grid is None:  # off a grid a few deltas are enumerated in float, with a tie tolerance
        return None
    ints = stats.integer_deltas_of(*arms, grid)
    signs = np.sign(ints) if isinstance(ints, np.ndarray) else [(d > 0) - (d < 0) for d in ints]
    level = float(config.alpha)
    p = float(rule_numbers["p_value"])
    low, high = p - 2 * stats.EXACT_MARGIN, p + stats.EXACT_MARGIN
    accepted = Fraction(rule_numbers["p_exact"]) <= as_fraction(config.alpha)  # the rule's own decision
    holds = {0: True, 1: not accepted or 2 * high <= level, -1: accepted or 2 * low - 1 > level}

    def bound(j: int) -> str | None:
        return outcome(accepted) if holds[int(signs[j])] else None

    return bound


def _first_of_each_pair(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Index of the first occurrence of each distinct (a[i], b[i]) pair, by sorting one integer code per
    pair (100× cheaper than ``np.unique(axis=0)``)."""
    _, a_codes = np.unique(a, return_inverse=True)
    _, b_codes = np.unique(b, return_inverse=True)
    codes = a_codes.astype(np.int64) * (int(b_codes.max(initial=0)) + 1) + b_codes
    first: np.ndarray
    _, first = np.unique(codes, return_index=True)
    return first
