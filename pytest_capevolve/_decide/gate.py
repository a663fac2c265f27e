"""The gate: candidate vs best on val → a verdict with its numbers (:func:`decide`).

Pure: arrays in, a plain-data :class:`Verdict` out. Nothing here reads the run dir, so the
same verdict can be re-derived by ``capevolve gate`` from persisted rollouts at any time. The
per-mode rules and their registry are in :mod:`.rules` (``GATE_MODES`` is re-exported here,
where the spec and the CLI read it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from .. import _stats as stats
from .rules import (
    EXACT_P_MODES,
    GATE_MODES,
    LEGACY_MODES,
    RULES,
    RuleInput,
    RuleNumbers,
    alpha_text,
    outcome,
    run_rule,
)
from .verdict import ACCEPT, INDECISIVE, REJECT, GateConfig, GateSplitError, Verdict

__all__ = [
    "ACCEPT",
    "GATE_MODES",
    "INDECISIVE",
    "LEGACY_MODES",
    "REJECT",
    "RULES",
    "GateConfig",
    "GateSplitError",
    "RuleInput",
    "Verdict",
    "alpha_text",
    "decide",
    "regressions",
]


def regressions(
    candidate: np.ndarray,
    best: np.ndarray,
    task_ids: list[str],
    success_threshold: float,
) -> list[dict[str, Any]]:
    """Tasks the best passed (most trials at or above the threshold) whose mean dropped by
    more than their own noise: twice the SE of the per-task difference (any drop when both
    arms were constant)."""
    return _regressions_of((stats.summarize(candidate), stats.summarize(best)), task_ids, success_threshold)


def _regressions_of(
    arms: tuple[stats.ArmSummary, stats.ArmSummary], task_ids: list[str], success_threshold: float
) -> list[dict[str, Any]]:
    cand, best = arms
    # at least half of the best's valid trials at the threshold (nan compares False), counted in
    # integers; a task with no valid trial on either side has a nan drop, which is never a hit
    drop = best.means - cand.means
    # noise ≥ 0, so only a drop can be a hit: the candidate's per-task SEs (the one per-candidate
    # cost here) are computed on those tasks alone, row by row as task_stderrs does
    dropped = np.flatnonzero(best.passed(success_threshold) & (drop > 0))
    noise = 2 * np.sqrt(stats.task_stderrs(cand.matrix[dropped]) ** 2 + best.stderrs[dropped] ** 2)
    hit = drop[dropped] > noise
    return [
        {
            "task_id": task_ids[i],
            "best": float(best.means[i]),
            "candidate": float(cand.means[i]),
            "drop": float(drop[i]),
            "noise": float(task_noise),
        }
        for i, task_noise in zip(dropped[hit].tolist(), noise[hit].tolist(), strict=True)
    ]


def _strict_regressions(
    arms: tuple[stats.ArmSummary, stats.ArmSummary], task_ids: list[str], only: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Every task valid on both sides that the candidate scores lower than the best — the
    design's "lowers any val task the parent scored higher on" — decided on the per-task means
    as fractions (a tie is never a drop), in task order; ``only``: these tasks alone."""
    cand, best = arms
    valid = np.flatnonzero(~np.isnan(cand.means) & ~np.isnan(best.means)).tolist()
    exact = stats.exact_task_deltas(cand.matrix, best.matrix)
    wanted = None if only is None else set(only)
    return [
        {
            "task_id": task_ids[i],
            "best": float(best.means[i]),
            "candidate": float(cand.means[i]),
            "drop": float(-d),
            "drop_exact": str(-d),
            "noise": None,
        }
        for i, d in zip(valid, exact, strict=True)
        if d < 0 and (wanted is None or task_ids[i] in wanted)
    ]


def _guard_checks(
    arms: tuple[stats.ArmSummary, stats.ArmSummary], task_ids: list[str], guarded: Sequence[str]
) -> list[dict[str, Any]]:
    """Each stop_condition guard ("never break task X") on this pair: held (the candidate scores
    X no lower than the best, exactly), broken, or unmeasured (X has no valid trial on a side,
    or is not a gated task)."""
    broken = {r["task_id"]: r for r in _strict_regressions(arms, task_ids, guarded)}
    where = {t: i for i, t in enumerate(task_ids)}
    checks: list[dict[str, Any]] = []
    for task in guarded:
        i = where.get(task)
        if i is None:  # checked on val only (spend says so too): not this gate's to enforce
            checks.append({"task_id": task, "held": None, "note": "not a val task: unmeasured"})
            continue
        if task in broken:
            checks.append({**broken[task], "held": False})
            continue
        cand_mean, best_mean = arms[0].means_or_none[i], arms[1].means_or_none[i]
        measured = cand_mean is not None and best_mean is not None
        checks.append(
            {"task_id": task, "best": best_mean, "candidate": cand_mean, "held": True if measured else None}
        )
    return checks


def _drops_text(regs: list[dict[str, Any]], at_most: int = 5) -> str:
    shown = ", ".join(f"{r['task_id']} {r['best']:.2f}→{r['candidate']:.2f}" for r in regs[:at_most])
    return shown + (f" and {len(regs) - at_most} more" if len(regs) > at_most else "")


def _covered(arm: stats.ArmSummary) -> float:
    """:func:`stats.coverage`: the share of tasks with at least one valid trial."""
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
    """Gate ``candidate`` against ``best``: two tasks × trials reward matrices (nan = missing).

    Order of reasons: split guard → coverage (indecisive) → the mode's rule → null floor →
    regression veto → error-rate imbalance (indecisive when imputation would flip it).
    """
    if split != "val":
        raise GateSplitError(f"the gate reads only the val split; refusing to gate on {split!r}")
    # one summary per arm: the best's is shared by every candidate gated against it
    arms = stats.summarize(candidate), stats.summarize(best)
    candidate, best = arms[0].matrix, arms[1].matrix
    infra = dict(infra_errors or {"candidate": 0, "best": 0})
    deltas, mask = stats.paired_means(*arms)
    n = int(deltas.size)
    cov = {
        "candidate": _covered(arms[0]),
        "best": _covered(arms[1]),
        "paired": float(np.mean(mask)) if mask.size else 0.0,
    }
    delta_mean, se = stats.mean_se(deltas)
    cand_means, best_means = arms[0].means, arms[1].means
    per_task = {  # built from whole columns: 10,000 tasks × 20 candidates stay cheap
        t: {"candidate": c, "best": b, "delta": d}
        for t, c, b, d in zip(
            task_ids,
            arms[0].means_or_none,
            arms[1].means_or_none,
            _none_for_nan(cand_means - best_means),
            strict=True,
        )
    }
    used = np.flatnonzero(mask)[deltas != 0]
    footprint = [task_ids[i] for i in used.tolist()]
    if config.regression_rule == "strict":
        regs = _strict_regressions(arms, task_ids)
    else:
        regs = _regressions_of(arms, task_ids, config.success_threshold)
    guards = _guard_checks(arms, task_ids, config.guarded_tasks) if config.guarded_tasks else []
    delta_exact = stats.exact_mean_delta(arms[0].matrix, arms[1].matrix)
    # the floor is decided on fractions (an exact tie never exceeds it); its float is for reading
    spread_exact = stats.exact_spread(null_deltas) if null_deltas else None
    spread = None if spread_exact is None else float(spread_exact)
    # the verdict's numbers, shared by every outcome; the decision is filled in below
    measured = Verdict(
        tag=tag,
        against=against,
        decision=INDECISIVE,
        basis="coverage",
        reason="",
        mode=config.mode,
        alpha=float(config.alpha) if config.mode in EXACT_P_MODES else None,
        k_se=config.k_se if config.mode in ("paired", "significant") else None,
        n_tasks=n,
        trials=int(candidate.shape[1]) if candidate.ndim == 2 else 1,
        delta_mean=delta_mean,
        delta_exact=None if delta_exact is None else str(delta_exact),
        se=se,
        null_spread=spread,
        null_spread_exact=None if spread_exact is None else str(spread_exact),
        coverage=cov,
        min_coverage=config.min_coverage,
        footprint=footprint,
        regressions=regs,
        regression_rule=config.regression_rule,
        guards=guards,
        infra_errors=infra,
        per_task=per_task,
        split=split,
    )
    if n == 0 or cov["paired"] < config.min_coverage:
        shown = (
            "no task is valid on both sides: paired coverage 0%"
            if n == 0
            else f"paired coverage {cov['paired']:.0%}"
        )
        return replace(
            measured, reason=f"{shown} is below min_coverage {config.min_coverage:.0%}: could not judge"
        )
    ci = stats.mean_ci(deltas, seed=config.seed)
    ci_method = stats.mean_ci_method(n)
    if config.clusters:  # the cluster-robust SE and interval, on the clusters' degrees of freedom
        from .._stats.clusters import cluster_mean_ci

        se, ci = cluster_mean_ci(
            deltas, [c for c, k in zip(config.clusters, mask.tolist(), strict=True) if k]
        )
        measured = replace(measured, se=se)
        ci_method = "cluster_t"
    rule = run_rule(candidate, best, deltas, config, candidate_size, best_size, arms)
    decision, basis, reason, numbers = rule
    bar = numbers.get("bar")
    if decision == ACCEPT and not stats.exceeds(_less_margin(delta_exact, config), spread_exact):
        decision, basis = REJECT, "null_floor"
        less = f" − margin {config.margin:+g}" if config.margin else ""
        reason = (
            f"Δ̄{less} = {float(_less_margin(delta_exact, config) or 0):+.4f} does not exceed the "
            f"null controls' own spread {spread:.4f}, so it cannot be told from re-running the best"
        )
    if spread is not None:  # under a margin δ the floor is Δ̄ > δ + spread (bar δ before it)
        bar = max(bar or config.margin, spread + config.margin)
    floor = (delta_exact, spread_exact)
    stable = _survives_dropping_any_task(arms, config, candidate_size, best_size, floor, decision, numbers)
    leaning = decision != ACCEPT and (delta_mean or 0.0) > 0
    if decision == ACCEPT and config.veto_regressions and regs:
        decision, basis = REJECT, "regression_veto"
        if config.regression_rule == "strict":
            reason = (
                f"vetoed (no regression, strict): {len(regs)} task(s) the best scored higher on "
                f"dropped ({_drops_text(regs)})"
            )
        else:
            reason = (
                f"vetoed: {len(regs)} task(s) the best passed dropped by more than their own "
                f"noise ({', '.join(r['task_id'] for r in regs[:5])})"
            )
    broken = [g for g in guards if g["held"] is False]
    unmeasured = [g["task_id"] for g in guards if g["held"] is None and "note" not in g]
    if decision == ACCEPT and broken:
        decision, basis = REJECT, "guard"
        reason = f"vetoed by the stop condition's guard: the candidate lowers {_drops_text(broken)}"
    elif decision == ACCEPT and unmeasured:
        decision, basis = INDECISIVE, "guard"
        reason = (
            f"the stop condition guards task(s) {', '.join(unmeasured)}, which have no valid "
            "val trial on both sides: the guard cannot be checked, so the accept cannot stand"
        )
    redrawn = first_attempts is not None and bool(
        np.count_nonzero(np.isnan(first_attempts[0])) > np.count_nonzero(np.isnan(candidate))
    )
    if infra.get("candidate", 0) != infra.get("best", 0) or (redrawn and decision == ACCEPT):
        # against an accept, a trial paid again after an infra error is imputed as the error it
        # first was (``first_attempts``: the matrices with those trials missing), so a candidate
        # that ends its failing draws in errors gains nothing from the redraw (a redraw can only
        # favour the arm whose code chose it: a reject stands on the draws as paid)
        chosen = first_attempts is not None and decision == ACCEPT
        imputed_from = first_attempts if chosen and first_attempts is not None else (candidate, best)
        flipped = _imputation_flips(*imputed_from, decision, config, candidate_size, best_size)
        if flipped:
            decision, basis = INDECISIVE, "error_imbalance"
            reason = (
                f"infra errors differ between the arms ({infra.get('candidate', 0)} vs "
                f"{infra.get('best', 0)}) and worst-case imputation of the missing trials "
                "(and of each trial paid again after an infra error) would flip the decision: "
                "could not judge"
            )
    return replace(
        replace(measured, **numbers),  # the rule's numbers; the gate's own bar overrides its one
        decision=decision,
        basis=basis,
        reason=reason,
        ci=None if ci is None else [ci[0], ci[1]],
        ci_method=None if ci is None else ci_method,
        bar=bar,
        verdict_stable=stable,
        directionally_positive_but_inconclusive=leaning,
    )


def _less_margin(delta: Fraction | None, config: GateConfig) -> Fraction | None:
    """Δ̄ less a non-inferiority margin (Δ̄ itself without one): what the null floor must clear,
    since "no worse than δ" is shown by Δ̄ − δ, not by Δ̄."""
    if delta is None or not config.margin:
        return delta
    return delta - Fraction(str(config.margin))


STABILITY_CHECKS = 64  # distinct task outcomes tried at most; past that, stability is not computed


def _survives_dropping_any_task(
    arms: tuple[stats.ArmSummary, stats.ArmSummary],
    config: GateConfig,
    candidate_size: int | None,
    best_size: int | None,
    floor: tuple[Fraction | None, Fraction | None],
    decision: str,
    rule_numbers: RuleNumbers,
) -> bool | None:
    """Would the rule (and the null floor) decide the same with any one task left out?

    Tasks with the same pair of per-task means are interchangeable for every rule, so one of
    each kind is dropped in turn. None (not computed) past :data:`STABILITY_CHECKS` kinds.
    ``floor``: the exact Δ̄ and the nulls' exact spread (None: no null floor).
    The exact rule's p-value bounds most drops without a new test (:func:`_exact_drop_bound`)."""
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
    bound = _exact_drop_bound(arms, config, rule_numbers)
    for j in sorted(int(j) for j in first):
        deltas = np.delete(all_deltas, j)  # the paired deltas with task valid[j] left out
        again = bound(j) if bound is not None else None
        if again is None:
            dropped = arms[0].without(int(valid[j])), arms[1].without(int(valid[j]))
            cand, bst = dropped[0].matrix, dropped[1].matrix
            left = config
            if config.clusters:  # the left-out task leaves its cluster too
                kept = [c for i, c in enumerate(config.clusters) if i != int(valid[j])]
                left = replace(config, clusters=tuple(kept))
            again, *_ = run_rule(cand, bst, deltas, left, candidate_size, best_size, dropped)
        if again == ACCEPT and spread is not None:  # the floor on the rest, in fractions
            left_out = stats.exact_task_deltas(arms[0].matrix, arms[1].matrix, rows=[int(valid[j])])
            if not stats.exceeds(_less_margin((total - left_out[0]) / (valid.size - 1), config), spread):
                again = REJECT
        if again != decision:
            return False
    return True


def _exact_drop_bound(
    arms: tuple[stats.ArmSummary, stats.ArmSummary], config: GateConfig, rule_numbers: RuleNumbers
) -> Callable[[int], str | None] | None:
    """For the exact rule with an exact p on a reward grid: the rule's decision with the j-th paired task left
    out, where the full p decides it, else None (then the test is run again).

    With S the sign-flipped sum over the other tasks and d the left-out task's delta, the full
    p = ½·P(S ≥ obs − |d|) + ½·P(S ≥ obs + |d|), and the left-out p is P(S ≥ obs − d). So
    d = 0 leaves p unchanged (a zero carries no sign); d > 0 gives p ≤ p_left ≤ 2p; d < 0 gives
    2p − 1 ≤ p_left ≤ p. The rule accepts iff the (exact) p ≤ α, so the bound decides whenever
    it lies on one side of α; the float p is within :data:`stats.EXACT_MARGIN` of the exact one
    (a ``float_tail`` p is the float plus that margin: the exact p lies in [p − 2·margin, p]).
    """
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
    alpha = config.alpha if isinstance(config.alpha, Fraction) else Fraction(str(config.alpha))
    accepted = Fraction(rule_numbers["p_exact"]) <= alpha  # the rule's own decision

    def bound(j: int) -> str | None:
        if signs[j] == 0:
            return outcome(accepted)
        if signs[j] > 0:
            if not accepted or 2 * high <= level:
                return outcome(accepted)
            return None
        if accepted or 2 * low - 1 > level:
            return outcome(accepted)
        return None

    return bound


def _first_of_each_pair(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Index of the first occurrence of each distinct (a[i], b[i]) pair: ``np.unique(pairs,
    axis=0, return_index=True)``'s second result, by sorting one integer code per pair rather
    than rows (a row sort of 10,000 pairs costs ~100× more)."""
    _, a_codes = np.unique(a, return_inverse=True)
    _, b_codes = np.unique(b, return_inverse=True)
    codes = a_codes.astype(np.int64) * (int(b_codes.max(initial=0)) + 1) + b_codes
    first: np.ndarray
    _, first = np.unique(codes, return_index=True)
    return first


def _none_for_nan(values: np.ndarray) -> list[float | None]:
    listed: list[float | None] = values.tolist()
    if not np.isnan(values).any():
        return listed
    return [None if v != v else v for v in listed]  # v != v: nan


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
    imputed, *_ = run_rule(cand, bst, deltas, config, candidate_size, best_size)
    return imputed != decision
