"""The gate's rules, one function per mode in :data:`RULES`, and its checks after them in :data:`CHECKS`.

A rule reads a :class:`RuleInput` and answers a :class:`RuleResult`; each check then answers a new decision
or None. A new mode or check is one function and one registry line; the spec, the CLI and the docs derive
from the registries."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from .. import _stats as stats
from .alpha_budget import as_fraction
from .basis import Basis
from .verdict import ACCEPT, INDECISIVE, REJECT, GateConfig, Verdict

if TYPE_CHECKING:  # numpy is imported by the rules that run: the spec's validation reads GATE_MODES
    # in every process, and an xdist worker, which never gates, need not import numpy for it
    import numpy as np


@dataclass(frozen=True)
class RuleInput:
    """What every gate rule may read: both arms, the paired deltas, the config, and the snapshot sizes."""

    candidate: np.ndarray
    best: np.ndarray
    deltas: np.ndarray
    config: GateConfig
    candidate_size: int | None
    best_size: int | None
    arms: tuple[stats.ArmSummary, stats.ArmSummary] | None = None  # the two arms' summaries

    def run(self) -> RuleResult:
        """The rule of this input's gate mode."""
        rule = RULES.get(self.config.mode)
        if rule is None:
            raise ValueError(f"unknown gate mode {self.config.mode!r}; use one of {', '.join(GATE_MODES)}")
        return rule(self)

    @property
    def summaries(self) -> tuple[stats.ArmSummary, stats.ArmSummary]:
        return self.arms or (stats.ArmSummary(self.candidate), stats.ArmSummary(self.best))

    @property
    def arm_delta(self) -> float:
        """cap-evolve's unpaired Δ: difference of the arms' means of task means."""
        import numpy as np

        return float(np.nanmean(stats.task_means(self.candidate)) - np.nanmean(stats.task_means(self.best)))


class RuleNumbers(TypedDict, total=False):
    """The numbers a rule decided on, each a :class:`~.verdict.Verdict` field of the same name."""

    p_value: float
    p_method: str
    p_exact: str
    bar: float | None
    se: float
    warnings: list[str]
    margin: dict[str, Any]


class RuleResult(NamedTuple):
    decision: str
    basis: str
    reason: str
    numbers: RuleNumbers


def _exact(x: RuleInput) -> RuleResult:
    import numpy as np

    config = x.config
    if config.margin or config.equivalence:
        return _margin(x)
    # (float(α): the tests compare it with a float p only, where a Fraction acts as its float)
    if config.clusters:  # whole clusters flipped (_stats/clusters.py)
        from .._stats.clusters import cluster_sign_flip_test

        result = cluster_sign_flip_test(
            x.candidate, x.best, config.clusters, alpha=float(config.alpha), seed=config.seed
        )
        _, mask = stats.paired_deltas(x.candidate, x.best)
        groups = len({c for c, keep in zip(config.clusters, mask.tolist(), strict=True) if keep})
        flipped = f"flipping {groups} clusters of {x.deltas.size} tasks"
    else:
        result = stats.sign_flip_test(*x.summaries, alpha=float(config.alpha), seed=config.seed)
        flipped = f"over {x.deltas.size} tasks"
    ok = result.at_most(config.alpha)
    reason = (
        f"one-sided paired sign-flip test {flipped}: p = {result.p_value:.4g} "
        f"{'≤' if ok else '>'} α = {alpha_text(config.alpha)} (Δ̄ = {float(np.mean(x.deltas)):+.4f}; "
        f"p by {result.describe()})"
    )
    numbers = RuleNumbers(
        p_value=result.p_value,
        p_method=result.method,
        p_exact=f"{result.numerator}/{result.denominator}",
        bar=None,
    )
    return RuleResult(outcome(ok), Basis.EXACT, reason, numbers)


def _margin(x: RuleInput) -> RuleResult:
    """The exact rule asked a margin ("no worse than δ", "within ±m"): :mod:`.._stats.margin`'s test."""
    import numpy as np

    from .._stats.margin import EQUIVALENCE, NON_INFERIORITY, lower_bound, margin_test

    config = x.config
    kind, size = (EQUIVALENCE, config.equivalence) if config.equivalence else (NON_INFERIORITY, config.margin)
    result = margin_test(x.deltas, kind=kind, margin=size, alpha=float(config.alpha))
    alpha = as_fraction(config.alpha)
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
    """The exact sign test on a judge's preferences: tasks with a non-zero net preference."""
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
    ok = p <= as_fraction(x.config.alpha)
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
    """cap-evolve's Δ̄ > k·SE(d), decided on fractions (k as written): a tie, such as a one-task gain at k
    = 1, is a reject at every n."""
    import numpy as np

    se = stats.mean_se(x.deltas)[1] or 0.0  # one task: SE undefined, treated as 0 (warned)
    mean = float(np.mean(x.deltas))
    exact = stats.exact_task_deltas(x.candidate, x.best)
    above = stats.exceeds_k_se(exact, Fraction(str(x.config.k_se)))
    if above is None:  # SE 0 or undefined, exactly: the strict fallback, on the exact Δ̄
        se = 0.0
        mean_exact = stats.exact_mean(exact)
        above = mean_exact is not None and mean_exact > 0
    detail = f"SE = {se:.4f}, n = {x.deltas.size}; decided on exact fractions"
    return _k_se_rule(Basis.PAIRED, "paired Δ̄", mean, se, x.config.k_se, detail, ok=above)


def _significant(x: RuleInput) -> RuleResult:
    se = math.sqrt(stats.combined_se(x.candidate) ** 2 + stats.combined_se(x.best) ** 2)
    return _k_se_rule(Basis.SIGNIFICANT, "Δ", x.arm_delta, se, x.config.k_se, f"combined SE = {se:.4f}")


def _above(basis: str, delta: float, bar: float, label: str) -> RuleResult:
    ok = delta > bar
    return RuleResult(outcome(ok), basis, f"Δ = {delta:+.4f} {'>' if ok else '≤'} {label}", {"bar": bar})


def _simplicity_tiebreak(x: RuleInput) -> RuleResult:
    delta, cand_size, best_size = x.arm_delta, x.candidate_size, x.best_size
    decision, reason = ACCEPT, f"Δ = {delta:+.4f} > 0"
    if delta <= 0:
        smaller = cand_size is not None and best_size is not None and cand_size < best_size
        if abs(delta) <= 1e-9 and smaller:
            reason = f"tie (Δ = {delta:+.4f}); the smaller candidate wins ({cand_size} < {best_size} bytes)"
        else:
            decision, reason = REJECT, f"Δ = {delta:+.4f} ≤ 0 and no simpler tie"
    return RuleResult(decision, Basis.SIMPLICITY_TIEBREAK, reason, {"bar": 0.0})


# The one registry of gate rules: mode name → rule. Every list of modes (spec validation, the
# CLI's choices, the generated docs reference) derives from it; ``exact`` first, then
# cap-evolve's legacy modes.
RULES: dict[str, Callable[[RuleInput], RuleResult]] = {
    "exact": _exact,
    "paired": _paired,
    "significant": _significant,
    "strict": lambda x: _above(Basis.STRICT, x.arm_delta, 0.0, "0"),
    "threshold": lambda x: _above(
        Basis.THRESHOLD, x.arm_delta, x.config.threshold, f"threshold {x.config.threshold}"
    ),
    "simplicity_tiebreak": _simplicity_tiebreak,
    "pairwise": _pairwise,
}
GATE_MODES = tuple(RULES)
EXACT_P_MODES = ("exact", "pairwise")  # rules whose p is an exact fraction: α is split among siblings


@dataclass(frozen=True)
class CheckInput:
    """What the post-rule checks read: the rule's input, the verdict's numbers and ``first_attempts`` (the
    matrices with each redrawn trial missing)."""

    rule: RuleInput
    measured: Verdict
    first_attempts: tuple[np.ndarray, np.ndarray] | None

    @property
    def delta_exact(self) -> Fraction | None:
        return None if self.measured.delta_exact is None else Fraction(self.measured.delta_exact)

    @property
    def spread_exact(self) -> Fraction | None:
        spread = self.measured.null_spread_exact
        return None if spread is None else Fraction(spread)


def _null_floor(x: CheckInput, decision: str) -> tuple[str, str] | None:
    """An accept whose Δ̄ (less a margin) does not exceed the null controls' spread is a reject."""
    config, less = x.rule.config, less_margin(x.delta_exact, x.rule.config)
    if decision != ACCEPT or stats.exceeds(less, x.spread_exact):
        return None
    shown = f" − margin {config.margin:+g}" if config.margin else ""
    return REJECT, (
        f"Δ̄{shown} = {float(less or 0):+.4f} does not exceed the null controls' own spread "
        f"{float(x.spread_exact or 0):.4f}, so it cannot be told from re-running the best"
    )


def _regression_veto(x: CheckInput, decision: str) -> tuple[str, str] | None:
    regs = x.measured.regressions
    if decision != ACCEPT or not x.rule.config.veto_regressions or not regs:
        return None
    if x.rule.config.regression_rule == "strict":
        return REJECT, (
            f"vetoed (no regression, strict): {len(regs)} task(s) the best scored higher on "
            f"dropped ({drops_text(regs)})"
        )
    return REJECT, (
        f"vetoed: {len(regs)} task(s) the best passed dropped by more than their own "
        f"noise ({', '.join(r['task_id'] for r in regs[:5])})"
    )


def _guard_veto(x: CheckInput, decision: str) -> tuple[str, str] | None:
    """An accept that lowers a guarded task is a reject; one whose guarded task has no valid trial on both
    sides is indecisive."""
    broken = [g for g in x.measured.guards if g["held"] is False]
    unmeasured = [g["task_id"] for g in x.measured.guards if g["held"] is None and "note" not in g]
    if decision != ACCEPT or not (broken or unmeasured):
        return None
    if broken:
        return REJECT, f"vetoed by the stop condition's guard: the candidate lowers {drops_text(broken)}"
    return INDECISIVE, (
        f"the stop condition guards task(s) {', '.join(unmeasured)}, which have no valid "
        "val trial on both sides: the guard cannot be checked, so the accept cannot stand"
    )


def _error_imbalance(x: CheckInput, decision: str) -> tuple[str, str] | None:
    """Infra errors that differ between the arms (or a redraw behind an accept): indecisive when worst-case
    imputation would flip the decision."""
    import numpy as np

    r, infra, first = x.rule, x.measured.infra_errors, x.first_attempts
    if first is not None:  # a cell whose first draw failed in both arms was paid again as a pair (an
        # outage, as far as the record shows): its new pair counts; candidate code that ends its failing
        # draws in errors still faces the worst case wherever the best's first draw stood
        both = np.isnan(first[0]) & np.isnan(first[1])
        first = (np.where(both, r.candidate, first[0]), np.where(both, r.best, first[1]))
    redrawn = first is not None and bool(
        np.count_nonzero(np.isnan(first[0])) > np.count_nonzero(np.isnan(r.candidate))
    )
    if infra.get("candidate", 0) == infra.get("best", 0) and not (redrawn and decision == ACCEPT):
        return None
    # against an accept, a trial paid again after an infra error is imputed as the error it
    # first was (``first_attempts``: the matrices with those trials missing), so a candidate
    # that ends its failing draws in errors gains nothing from the redraw (a redraw can only
    # favour the arm whose code chose it: a reject stands on the draws as paid)
    imputed_from = first if first is not None and decision == ACCEPT else (r.candidate, r.best)
    if not _imputation_flips(*imputed_from, decision, r.config, r.candidate_size, r.best_size):
        return None
    return INDECISIVE, (
        f"infra errors differ between the arms ({infra.get('candidate', 0)} vs "
        f"{infra.get('best', 0)}) and worst-case imputation of the missing trials "
        "(and of each trial paid again after an infra error) would flip the decision: "
        "could not judge"
    )


# The gate's checks after the mode's rule, in order, each a basis and a check that answers a
# new (decision, reason) or None (the decision stands). The null floor is first: the rule and
# it are what the stability check asks again with a task left out (gate._survives_…); the
# vetoes after it only withdraw an accept, and imputation can make any decision indecisive.
Check = Callable[[CheckInput, str], tuple[str, str] | None]
CHECKS: tuple[tuple[Basis, Check], ...] = (
    (Basis.NULL_FLOOR, _null_floor),
    (Basis.REGRESSION_VETO, _regression_veto),
    (Basis.GUARD, _guard_veto),
    (Basis.ERROR_IMBALANCE, _error_imbalance),
)


def run_checks(x: CheckInput, ruled: RuleResult, checks: tuple[tuple[Basis, Check], ...]) -> RuleResult:
    decision, basis, reason, numbers = ruled
    for check_basis, check in checks:
        turned = check(x, decision)
        if turned is not None:
            (decision, reason), basis = turned, check_basis
    return RuleResult(decision, basis, reason, numbers)


def less_margin(delta: Fraction | None, config: GateConfig) -> Fraction | None:
    """Δ̄ less a non-inferiority margin: what the null floor must clear, since δ shifts what is shown."""
    if delta is None or not config.margin:
        return delta
    return delta - Fraction(str(config.margin))


def drops_text(regs: list[dict[str, Any]], at_most: int = 5) -> str:
    shown = ", ".join(f"{r['task_id']} {r['best']:.2f}→{r['candidate']:.2f}" for r in regs[:at_most])
    return shown + (f" and {len(regs) - at_most} more" if len(regs) > at_most else "")


def _imputation_flips(
    candidate: np.ndarray,
    best: np.ndarray,
    decision: str,
    config: GateConfig,
    candidate_size: int | None,
    best_size: int | None,
) -> bool:
    import numpy as np

    if decision == ACCEPT:  # candidate's missing trials fail, best's succeed
        cand, bst = np.nan_to_num(candidate, nan=0.0), np.nan_to_num(best, nan=1.0)
    else:
        cand, bst = np.nan_to_num(candidate, nan=1.0), np.nan_to_num(best, nan=0.0)
    deltas, _ = stats.paired_deltas(cand, bst)  # every task: decide() got here with n > 0
    imputed, *_ = RuleInput(cand, bst, deltas, config, candidate_size, best_size).run()
    return imputed != decision


def _k_se_rule(
    basis: str, label: str, delta: float, se: float, k_se: float, detail: str, *, ok: bool | None = None
) -> RuleResult:
    """cap-evolve's "delta > k·SE"; an SE of 0 falls back to delta > 0 with a warning. ``ok``: the
    comparison already decided exactly."""
    if se == 0.0:
        ok = delta > 0 if ok is None else ok
        reason = (
            f"{label} = {delta:+.4f} {'>' if ok else '≤'} 0 (WARNING: SE = 0, so the rule fell back "
            "to strict: any improvement wins)"
        )
        return RuleResult(
            outcome(ok),
            basis,
            reason,
            {"bar": 0.0, "warnings": [f"{basis} SE = 0: strict fallback"], "se": se},
        )
    bar = k_se * se
    ok = delta > bar if ok is None else ok
    reason = f"{label} = {delta:+.4f} {'>' if ok else '≤'} {k_se}·SE = {bar:.4f} ({detail})"
    return RuleResult(outcome(ok), basis, reason, {"bar": bar, "se": se})


def alpha_text(alpha: float | Fraction) -> str:
    """α as people read it: 0.05, or a split of it as 0.01667."""
    return f"{float(alpha):.4g}"


def outcome(ok: bool) -> str:
    return ACCEPT if ok else REJECT
