"""Rounds: siblings gated serially against the current best, under one family-wise α.

The first sibling accepted becomes the best and the rest are gated again against it on the same paired
seeds. ``holm`` (default) decides each stage at Holm's step-down levels exactly; ``bh`` controls the FDR;
``none`` decides each at α (family rate up to k·α). Only the exact-p modes are corrected. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from .alpha_budget import as_fraction
from .rules import EXACT_P_MODES, alpha_text
from .verdict import ACCEPT, GateConfig, Verdict

MULTIPLE = ("holm", "bh", "none")
_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg"}
Judge = Callable[[str, str, GateConfig], Verdict]


def family_levels(p_values: Sequence[Fraction], alpha: Fraction, method: str) -> list[Fraction]:
    """The level each test is decided at, so ``p_i ≤ level_i`` is exactly the method's decision (after
    Holm's first failure every later test gets that failing level)."""
    k = len(p_values)
    order = sorted(range(k), key=lambda i: p_values[i])
    if method == "none" or k <= 1:
        return [alpha] * k
    if method == "holm":
        levels: list[Fraction] = [alpha] * k
        stopped: Fraction | None = None
        for rank, i in enumerate(order):
            levels[i] = stopped if stopped is not None else alpha / (k - rank)
            if stopped is None and p_values[i] > levels[i]:
                stopped = levels[i]
        return levels
    if method == "bh":
        passing = [rank + 1 for rank, i in enumerate(order) if p_values[i] <= alpha * (rank + 1) / k]
        return [alpha * max(passing, default=1) / k] * k
    raise ValueError(f"unknown multiple-testing method {method!r}; use one of {', '.join(MULTIPLE)}")


@dataclass
class Round:
    verdicts: list[Verdict]  # one per sibling, in the order given; ``against`` says vs which best
    best: str  # the best after the round


def gate_round(judge: Judge, siblings: Sequence[str], best: str, config: GateConfig, method: str) -> Round:
    if method not in MULTIPLE:
        raise ValueError(f"unknown multiple-testing method {method!r}; use one of {', '.join(MULTIPLE)}")
    decided: dict[str, Verdict] = {}
    remaining, current, previous = list(siblings), best, None
    while remaining:
        stage = _stage(judge, remaining, current, config, method)
        if previous is not None:
            stage = {
                t: _note(v, f"re-gated against {current!r}, accepted earlier in this round")
                for t, v in stage.items()
            }
        winner = next((t for t in remaining if stage[t].decision == ACCEPT), None)
        if winner is None:
            decided.update(stage)
            break
        cut = remaining.index(winner) + 1
        decided.update({t: stage[t] for t in remaining[:cut]})
        remaining, previous, current = remaining[cut:], current, winner
    return Round([decided[t] for t in siblings], current)


def _stage(
    judge: Judge, tags: list[str], against: str, config: GateConfig, method: str
) -> dict[str, Verdict]:
    first = {t: judge(t, against, config) for t in tags}
    if config.mode not in EXACT_P_MODES or len(tags) == 1:
        return first
    p_values = [Fraction(v.p_exact) if v.p_exact else Fraction(1) for v in first.values()]
    alpha = as_fraction(config.alpha)
    levels = family_levels(p_values, alpha, method)
    family = {"method": method, "siblings": len(tags), "alpha": float(alpha)}
    out = {}
    for (tag, verdict), level in zip(first.items(), levels, strict=True):
        if level != alpha and verdict.p_exact:  # decided again at its family level
            verdict = judge(tag, against, replace(config, alpha=level))
            verdict = _note(verdict, f"α = {split_text(alpha, level, method)}, {len(tags)} siblings")
        elif method != "none":  # at the full α, but by the family's rule: say which, and its level
            verdict = _note(verdict, f"α = {alpha_text(level)} by {_NAMES[method]}, {len(tags)} siblings")
        # the exact level too: a re-derivation (``capevolve gate``) decides at it, not at its float
        record = {**family, "level": float(level), "level_exact": str(level)}
        out[tag] = replace(verdict, details={**verdict.details, "family": record})
        if method == "none":
            rate = alpha_text(len(tags) * alpha)
            out[tag] = _note(out[tag], f"{len(tags)} siblings each at α: the family rate is up to {rate}")
    return out


def split_text(alpha: Fraction, level: Fraction, method: str) -> str:
    ratio = alpha / level
    how = f"/ {ratio}" if ratio.denominator == 1 else f"× {level / alpha}"
    return f"{alpha_text(level)} ({float(alpha):g} {how} by {_NAMES.get(method, method)})"


def _note(verdict: Verdict, note: str) -> Verdict:
    return replace(verdict, reason=f"{verdict.reason}; {note}")
