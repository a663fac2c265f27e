"""Trials-first designs for ``cost_per_decision.py`` (issue 40): trial 1 on every val task, a look, the
next trial on every task only while undecided — each through the package's own statistics."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Protocol

import numpy as np
from scipy import stats as sps
from sequential import ALPHA, MIN_EFFECT

from pytest_capevolve import _stats as stats
from pytest_capevolve._decide.alpha_budget import MAX_LOOKS, look_schedule
from pytest_capevolve._decide.rules import RuleInput
from pytest_capevolve._decide.stopping import ALPHA_FUTILITY
from pytest_capevolve._decide.verdict import ACCEPT, GateConfig
from pytest_capevolve._stats.sequential import first_crossings
from pytest_capevolve._stats.sign_flip import sign_flips

RESAMPLES = 1000  # the joint last look's sign flips (as cost_per_decision's exhaustion_p)


class Paired(Protocol):
    """Simulated candidates: draws × tasks × trials rewards of both arms (cost_per_decision's Arms)."""

    cand: np.ndarray
    best: np.ndarray


def _rule(cand: np.ndarray, best: np.ndarray, config: GateConfig) -> bool:
    deltas, _ = stats.paired_deltas(cand, best)
    return RuleInput(cand, best, deltas, config, None, None).run().decision == ACCEPT


def trial_levels(trials: int) -> list[Fraction]:
    """α per look of a trials-first design, one look per trial: the package's look schedule (α/2,
    α/4, α/4 at 3 trials), α/trials each past :data:`MAX_LOOKS`."""
    return look_schedule(ALPHA, trials) if trials <= MAX_LOOKS else [Fraction(ALPHA) / trials] * trials


def null_tail(magnitudes: np.ndarray) -> np.ndarray:
    """P(Σ s_t·m_t ≥ x) under fair sign flips s, for x = −Σm … Σm (index x + Σm): the exact sign-flip
    law of integer magnitudes, in float (a product of scaled binomials, one per distinct value)."""
    values, mult = np.unique(magnitudes[magnitudes > 0], return_counts=True)
    law = np.ones(1)
    for v, m in zip(values.tolist(), mult.tolist(), strict=True):
        step = np.zeros(2 * v * m + 1)
        step[:: 2 * v] = sps.binom.pmf(np.arange(m + 1), m, 0.5)  # v·(2B − m), B ~ Bin(m, ½)
        law = np.convolve(law, step)
    return np.cumsum(law[::-1])[::-1]


def joint_last_p(
    sums: np.ndarray, levels: list[Fraction], futility: bool, n_resamples: int, seed: int
) -> Fraction:
    """The p of a trials-first design that reached its last look: ``sums`` is tasks × looks of integer
    paired deltas (look k: the candidate's first k trials' sum minus the best's). One task-level sign
    flip negates a task's delta at every look (the arms' rows swapped), so a flip replays the whole
    design: T = ∞ where a look before the last accepts (its exact p ≤ its level), −∞ where futility
    (Δ̄ ≤ 0) stopped it first, else the last look's sum. p = share of flips with T ≥ the observed
    (+1, seeded): early accepts and the last look are one test at α, the last look spending what the
    early looks left (more than Bonferroni's share: their accepts overlap)."""
    looks = sums.shape[1]
    tails = [null_tail(np.abs(sums[:, k])) for k in range(looks - 1)]
    spans = [int(np.abs(sums[:, k]).sum()) for k in range(looks - 1)]
    observed = int(sums[:, -1].sum())
    count = 0
    for signs in sign_flips(sums.shape[0], n_resamples, seed):
        flipped = signs.astype(np.int64) @ sums
        alive, accepted = np.ones(len(signs), dtype=bool), np.zeros(len(signs), dtype=bool)
        for k in range(looks - 1):
            hit = alive & (tails[k][flipped[:, k] + spans[k]] <= float(levels[k]))
            accepted |= hit
            alive &= ~hit & ((flipped[:, k] > 0) if futility else True)
        count += int(np.sum(accepted | (alive & (flipped[:, -1] >= observed))))
    return Fraction(count + 1, n_resamples + 1)


def trials_first(
    *, futility: bool = False, joint: bool = False
) -> Callable[[Paired], tuple[np.ndarray, np.ndarray]]:
    """Trial k on every val task, then a look (the exact rule on the first k trials of both arms: the
    candidate's trial j against the best's trial j, so the arms stay exchangeable) at :func:`trial_levels`;
    the next trial is paid only while undecided. ``futility``: a look with Δ̄ ≤ 0 rejects (binding: it only
    removes accepts). ``joint``: the last look by :func:`joint_last_p` instead of its Bonferroni share."""

    def path(a: Paired) -> tuple[np.ndarray, np.ndarray]:
        draws, n, trials = a.cand.shape
        levels = trial_levels(trials)
        accepted, paid = np.zeros(draws, dtype=bool), np.zeros(draws)
        for i in range(draws):
            for look in range(1, trials + 1):
                cand, best = a.cand[i][:, :look], a.best[i][:, :look]
                paid[i] = n * look
                if look == trials and joint:
                    sums = np.cumsum(a.cand[i] - a.best[i], axis=1).astype(np.int64)
                    accepted[i] = joint_last_p(sums, levels, futility, RESAMPLES, i) <= ALPHA
                    break
                if _rule(cand, best, GateConfig(alpha=levels[look - 1])):
                    accepted[i] = True
                    break
                if futility and float(np.mean(cand) - np.mean(best)) <= 0:
                    break
        return accepted, paid

    return path


def trials_first_e(a: Paired) -> tuple[np.ndarray, np.ndarray]:
    """Trials-first rounds with the sequential gate inside each: round k feeds the k-trial deltas to
    the efficacy e-process at the round's :func:`trial_levels` level and to futility, task by task, paying
    trial k only on the tasks it reads; a round that ends undecided pays trial k on the rest and moves
    on; the last round ends with the exact rule at its level."""
    draws, n, trials = a.cand.shape
    levels = trial_levels(trials)
    accepted, paid = np.zeros(draws, dtype=bool), np.zeros(draws)
    live = np.ones(draws, dtype=bool)
    for look in range(1, trials + 1):
        deltas = a.cand[:, :, :look].mean(axis=2) - a.best[:, :, :look].mean(axis=2)
        code, used = first_crossings(
            deltas,
            alpha_efficacy=float(levels[look - 1]),
            alpha_futility=float(ALPHA_FUTILITY),
            min_effect=MIN_EFFECT,
        )
        paid += np.where(live, np.where(code == 0, n, used), 0)
        accepted |= live & (code == 1)
        live &= code == 0
    config = GateConfig(alpha=levels[-1])
    for i in np.flatnonzero(live):
        accepted[i] = _rule(a.cand[i], a.best[i], config)
    return accepted, paid
