"""The gate's rules: one function per mode, registered in :data:`RULES`.

Each rule reads a :class:`RuleInput` (both arms, the paired deltas, the config) and answers
with a :class:`RuleResult`: decision, basis, reason, and the numbers it was decided on
(:class:`RuleNumbers`), which :func:`.gate.decide` writes into the verdict. A new gate mode is
one function here and one line in :data:`RULES`; the spec's validation, the CLI's choices and
the generated reference (docs/reference/cli.md) derive from the registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple, TypedDict

import numpy as np

from .. import _stats as stats
from .basis import Basis
from .verdict import ACCEPT, INDECISIVE, REJECT, GateConfig


@dataclass(frozen=True)
class RuleInput:
    """What every gate rule may read: both arms, the paired deltas over tasks valid on both
    sides, the config, and the snapshot sizes (for ``simplicity_tiebreak``)."""

    candidate: np.ndarray
    best: np.ndarray
    deltas: np.ndarray
    config: GateConfig
    candidate_size: int | None
    best_size: int | None
    arms: tuple[stats.ArmSummary, stats.ArmSummary] | None = None  # the two arms' summaries

    @property
    def arm_delta(self) -> float:
        """cap-evolve's unpaired Δ: difference of the arms' means of task means."""
        return float(np.nanmean(stats.task_means(self.candidate)) - np.nanmean(stats.task_means(self.best)))


class RuleNumbers(TypedDict, total=False):
    """The numbers a rule decided on, each a :class:`~.verdict.Verdict` field of the same name;
    a rule sets only those it computed."""

    p_value: float
    p_method: str
    p_exact: str
    bar: float | None
    se: float
    warnings: list[str]
    margin: dict[str, Any]


class RuleResult(NamedTuple):
    """What a rule decided, why, and on which numbers."""

    decision: str
    basis: str
    reason: str
    numbers: RuleNumbers


def _exact(x: RuleInput) -> RuleResult:
    """The default: a one-sided paired sign-flip test at α, decided on integers."""
    config = x.config
    if config.margin_asked:
        return _margin(x)
    if config.clusters:
        return _exact_clustered(x)
    arms = x.arms or (stats.ArmSummary(x.candidate), stats.ArmSummary(x.best))
    result = stats.paired_sign_flip(*arms, alpha=float(config.alpha), seed=config.seed)
    # (float(α): the test compares it with a float p only, where a Fraction acts as its float)
    ok = result.at_most(config.alpha)
    extra = RuleNumbers(
        p_value=result.p_value,
        p_method=result.method,
        p_exact=f"{result.numerator}/{result.denominator}",
        bar=None,
    )
    reason = (
        f"one-sided paired sign-flip test over {x.deltas.size} tasks: p = {result.p_value:.4g} "
        f"{'≤' if ok else '>'} α = {alpha_text(config.alpha)} (Δ̄ = {float(np.mean(x.deltas)):+.4f}; "
        f"p by {result.describe()})"
    )
    return RuleResult(outcome(ok), Basis.EXACT, reason, extra)


def _exact_clustered(x: RuleInput) -> RuleResult:
    """The exact rule when tasks come in clusters: whole clusters flipped (_stats/clusters.py)."""
    from .._stats.clusters import cluster_sign_flip_test

    config = x.config
    result = cluster_sign_flip_test(
        x.candidate, x.best, config.clusters, alpha=float(config.alpha), seed=config.seed
    )
    ok = result.at_most(config.alpha)
    _, mask = stats.paired_deltas(x.candidate, x.best)
    groups = len({c for c, keep in zip(config.clusters, mask.tolist(), strict=True) if keep})
    reason = (
        f"one-sided paired sign-flip test flipping {groups} clusters of {x.deltas.size} tasks: "
        f"p = {result.p_value:.4g} {'≤' if ok else '>'} α = {alpha_text(config.alpha)} "
        f"(Δ̄ = {float(np.mean(x.deltas)):+.4f}; p by {result.describe()})"
    )
    numbers = RuleNumbers(
        p_value=result.p_value,
        p_method=result.method,
        p_exact=f"{result.numerator}/{result.denominator}",
        bar=None,
    )
    return RuleResult(outcome(ok), Basis.EXACT, reason, numbers)


def _margin(x: RuleInput) -> RuleResult:
    """The exact rule asked a margin: "no worse than δ" or "within ±m", by the betting test of
    :mod:`.._stats.margin` (valid for any rewards in [0, 1]; tasks taken as independent)."""
    from .._stats.margin import EQUIVALENCE, NON_INFERIORITY, lower_bound, margin_test

    config = x.config
    kind, size = (EQUIVALENCE, config.equivalence) if config.equivalence else (NON_INFERIORITY, config.margin)
    result = margin_test(x.deltas, kind=kind, margin=size, alpha=float(config.alpha))
    alpha = config.alpha if isinstance(config.alpha, Fraction) else Fraction(str(config.alpha))
    ok = Fraction(result.p_value) <= alpha
    bounds = (
        f"{1 - float(alpha):.0%} bounds [{result.lower:+.4f}, {result.upper:+.4f}]"
        if result.upper is not None
        else f"{1 - float(alpha):.0%} lower bound {result.lower:+.4f}"
    )
    reason = (
        f"{result.question}: betting test over {x.deltas.size} tasks: p = {result.p_value:.4g} "
        f"{'≤' if ok else '>'} α = {alpha_text(config.alpha)} (Δ̄ = {float(np.mean(x.deltas)):+.4f}; {bounds})"
    )
    reach = lower_bound(np.zeros(x.deltas.size), float(alpha))  # the most that ties could show
    if not ok and reach <= (size if kind == NON_INFERIORITY else -size):
        reason += (
            f"; on {x.deltas.size} tasks even identical results bound the mean delta at {reach:+.4f} "
            "at best, so this margin cannot be shown here: give more tasks or ask a wider margin"
        )
    numbers = RuleNumbers(
        p_value=result.p_value,
        p_method="betting",
        p_exact=str(Fraction(result.p_value)),
        bar=size if kind == NON_INFERIORITY else None,
        margin=result.to_dict(),
    )
    return RuleResult(outcome(ok), kind, reason, numbers)


def _pairwise(x: RuleInput) -> RuleResult:
    """The exact sign test on a judge's preferences between the two arms' outputs: the tasks
    whose net preference is not zero, the candidate preferred on enough of them at α."""
    from .._stats.pairwise import p_greater_exact, sign_test

    nets = x.config.preferences
    if nets is None:
        return RuleResult(
            INDECISIVE,
            Basis.PAIRWISE,
            "gate_mode pairwise decides on the judge's preferences (the adapter's prefer()), and "
            "none is logged for this pair: a gate session of a run whose gate_mode is pairwise "
            "judges them (pytest --capevolve-run … --capevolve-gate; where one tried, its warning "
            "says what failed), and capevolve gate re-reads them",
            RuleNumbers(bar=None),
        )
    test = sign_test(nets)
    p = p_greater_exact(test.wins_b, test.wins_a)
    alpha = x.config.alpha
    ok = p <= (alpha if isinstance(alpha, Fraction) else Fraction(str(alpha)))
    reason = (
        f"sign test on the judge's preferences: the candidate preferred on {test.wins_b} tasks, "
        f"the best on {test.wins_a}, {test.ties} tied (net zero, not tested); p = {float(p):.4g} "
        f"{'≤' if ok else '>'} α = {alpha_text(x.config.alpha)}"
    )
    numbers = RuleNumbers(
        p_value=float(p), p_method="exact", p_exact=f"{p.numerator}/{p.denominator}", bar=None
    )
    return RuleResult(outcome(ok), Basis.PAIRWISE, reason, numbers)


def _paired(x: RuleInput) -> RuleResult:
    """cap-evolve's Δ̄ > k·SE(d), decided on the deltas as fractions (k as the decimal written),
    never on float rounding (:func:`.._stats.exceeds_k_se`): a tie — a one-task gain at k = 1
    has Δ̄ = SE exactly — is a reject at every n. The numbers shown are the floats."""
    se = stats.mean_se(x.deltas)[1] or 0.0  # one task: SE undefined, treated as 0 (warned)
    mean = float(np.mean(x.deltas))
    exact = stats.exact_task_deltas(x.candidate, x.best)
    above = stats.exceeds_k_se(exact, Fraction(str(x.config.k_se)))
    if above is None:  # SE 0 or undefined, exactly: the strict fallback, on the exact Δ̄
        se = 0.0
        mean_exact = stats.exact_mean(exact)
        above = mean_exact is not None and mean_exact > 0
    decision, basis, reason, extra = _k_se_rule(
        Basis.PAIRED,
        "paired Δ̄",
        mean,
        se,
        x.config.k_se,
        f"SE = {se:.4f}, n = {x.deltas.size}; decided on exact fractions",
        ok=above,
    )
    return RuleResult(decision, basis, reason, {**extra, "se": se})


def _significant(x: RuleInput) -> RuleResult:
    se = math.sqrt(stats.combined_se(x.candidate) ** 2 + stats.combined_se(x.best) ** 2)
    decision, basis, reason, extra = _k_se_rule(
        Basis.SIGNIFICANT, "Δ", x.arm_delta, se, x.config.k_se, f"combined SE = {se:.4f}"
    )
    return RuleResult(decision, basis, reason, {**extra, "se": se})


def _above(basis: str, delta: float, bar: float, label: str) -> RuleResult:
    ok = delta > bar
    return RuleResult(outcome(ok), basis, f"Δ = {delta:+.4f} {'>' if ok else '≤'} {label}", {"bar": bar})


def _threshold(x: RuleInput) -> RuleResult:
    return _above(Basis.THRESHOLD, x.arm_delta, x.config.threshold, f"threshold {x.config.threshold}")


def _strict(x: RuleInput) -> RuleResult:
    return _above(Basis.STRICT, x.arm_delta, 0.0, "0")


def _simplicity_tiebreak(x: RuleInput) -> RuleResult:
    delta = x.arm_delta
    if delta > 0:
        return RuleResult(ACCEPT, Basis.SIMPLICITY_TIEBREAK, f"Δ = {delta:+.4f} > 0", {"bar": 0.0})
    cand_size, best_size = x.candidate_size, x.best_size
    if abs(delta) <= 1e-9 and cand_size is not None and best_size is not None and cand_size < best_size:
        return RuleResult(
            ACCEPT,
            Basis.SIMPLICITY_TIEBREAK,
            f"tie (Δ = {delta:+.4f}); the smaller candidate wins ({cand_size} < {best_size} bytes)",
            {"bar": 0.0},
        )
    return RuleResult(
        REJECT, Basis.SIMPLICITY_TIEBREAK, f"Δ = {delta:+.4f} ≤ 0 and no simpler tie", {"bar": 0.0}
    )


# The one registry of gate rules: mode name → rule. Every list of modes (spec validation, the
# CLI's choices, the generated docs reference) derives from it; ``exact`` first, then
# cap-evolve's legacy modes.
RULES: dict[str, Callable[[RuleInput], RuleResult]] = {
    "exact": _exact,
    "paired": _paired,
    "significant": _significant,
    "strict": _strict,
    "threshold": _threshold,
    "simplicity_tiebreak": _simplicity_tiebreak,
    "pairwise": _pairwise,
}
GATE_MODES = tuple(RULES)
EXACT_P_MODES = ("exact", "pairwise")  # rules whose p is an exact fraction: α is split among siblings
LEGACY_MODES = ("paired", "significant", "strict", "threshold", "simplicity_tiebreak")  # cap-evolve's own


def run_rule(
    candidate: np.ndarray,
    best: np.ndarray,
    deltas: np.ndarray,
    config: GateConfig,
    candidate_size: int | None,
    best_size: int | None,
    arms: tuple[stats.ArmSummary, stats.ArmSummary] | None = None,
) -> RuleResult:
    """The rule of ``config.mode`` on these arms (ValueError for a mode not in :data:`RULES`)."""
    rule = RULES.get(config.mode)
    if rule is None:
        raise ValueError(f"unknown gate mode {config.mode!r}; use one of {', '.join(GATE_MODES)}")
    return rule(RuleInput(candidate, best, deltas, config, candidate_size, best_size, arms))


def _k_se_rule(
    basis: str, label: str, delta: float, se: float, k_se: float, detail: str, *, ok: bool | None = None
) -> RuleResult:
    """cap-evolve's "delta > k·SE"; an SE of 0 falls back to strict (delta > 0), with a warning
    kept in the verdict, since a zero SE means the rule cannot tell noise from signal. ``ok``:
    the comparison already decided exactly (``paired``); the floats only say it."""
    if se == 0.0:
        ok = delta > 0 if ok is None else ok
        return RuleResult(
            outcome(ok),
            basis,
            f"{label} = {delta:+.4f} {'>' if ok else '≤'} 0 (WARNING: SE = 0, so the rule fell back "
            "to strict: any improvement wins)",
            {"bar": 0.0, "warnings": [f"{basis} SE = 0: strict fallback"]},
        )
    bar = k_se * se
    ok = delta > bar if ok is None else ok
    return RuleResult(
        outcome(ok),
        basis,
        f"{label} = {delta:+.4f} {'>' if ok else '≤'} {k_se}·SE = {bar:.4f} ({detail})",
        {"bar": bar},
    )


def alpha_text(alpha: float | Fraction) -> str:
    """α as people read it: 0.05, or a split of it as 0.01667 — a fraction beside it read as
    "1 of 60 tasks", so where α was split the round says how (:mod:`.rounds`)."""
    return f"{float(alpha):.4g}"


def outcome(ok: bool) -> str:
    """A rule's pass/fail as a decision."""
    return ACCEPT if ok else REJECT
