"""Anytime-valid e-processes on paired per-task deltas (the sequential gate's statistics).

E_t = Π_{i ≤ t} (1 + λ_i·x_i), x_i = d_i − θ (efficacy) or θ − d_i (futility), with a predictable bet λ_i
∈ [0, 0.9] (aGRAPA, Waudby-Smith & Ramdas 2023), is a nonnegative supermartingale when E[x_i | past] ≤ 0,
so by Ville P(sup_t E_t ≥ 1/α) ≤ α at any stopping time. The cap keeps every factor ≥ 0.1, and is above
the textbook ½ because real agents' deltas have small variance next to their range (benchmarks/sequential.py).
Vectorized over rows, so the benchmark and the session share it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .sign_flip import sign_flips

MAX_BET = 0.9
PRIOR_MEAN = 0.0  # the bet starts at 0: no evidence, no stake
PRIOR_VAR = 0.25  # one pseudo-observation of the variance of a per-task delta (at most 1)


def bets(x: np.ndarray) -> np.ndarray:
    """Predictable aGRAPA bets for each step of ``x`` (… × t): λ_i uses x_1 … x_{i−1} only."""
    x = np.asarray(x, dtype=float)
    steps = x.shape[-1]
    past = np.arange(steps, dtype=float)  # observations before step i
    total = np.cumsum(x, axis=-1) - x  # Σ_{j<i} x_j
    total_sq = np.cumsum(x * x, axis=-1) - x * x
    mean = (PRIOR_MEAN + total) / (past + 1.0)
    # shrunk variance: Σ (x_j − mean)² over the past, plus one prior pseudo-observation
    var = (PRIOR_VAR + total_sq - 2.0 * mean * total + past * mean * mean) / (past + 1.0)
    var = np.maximum(var, 1e-12)
    bet: np.ndarray = np.clip(mean / (var + mean * mean), 0.0, MAX_BET)
    return bet


def efficacy_path(deltas: np.ndarray) -> np.ndarray:
    """The e-process against H0: mean delta ≤ 0."""
    x = np.asarray(deltas, dtype=float)
    path: np.ndarray = np.exp(np.cumsum(np.log1p(bets(x) * x), axis=-1))
    return path


def futility_path(deltas: np.ndarray, min_effect: float) -> np.ndarray:
    """The e-process against H0: mean delta ≥ ``min_effect`` (grows when deltas fall short of it)."""
    if not 0.0 <= min_effect < 1.0:
        raise ValueError(f"min_effect must be in [0, 1), got {min_effect}")
    return efficacy_path(min_effect - np.asarray(deltas, dtype=float))


EFFICACY, FUTILITY, UNDECIDED = "efficacy", "futility", "undecided"


@dataclass(frozen=True)
class SequentialState:
    tasks: int
    efficacy: float  # current E value against "no better"
    futility: float  # current E value against "at least min_effect better"
    stopped: str  # efficacy / futility (crossed, after ``tasks``), or undecided (still running)


def run(
    deltas: np.ndarray, *, alpha_efficacy: float, alpha_futility: float, min_effect: float
) -> SequentialState:
    """The deltas in order up to the first crossing: efficacy ≥ 1/α_e accepts, futility ≥ 1/α_f rejects."""
    deltas = np.asarray(deltas, dtype=float)
    if deltas.size == 0:
        return SequentialState(0, 1.0, 1.0, UNDECIDED)
    eff, fut = efficacy_path(deltas), futility_path(deltas, min_effect)
    [code], [used] = _first(eff >= 1.0 / alpha_efficacy, fut >= 1.0 / alpha_futility)
    kind, at = {1: EFFICACY, -1: FUTILITY, 0: UNDECIDED}[int(code)], int(used)
    return SequentialState(at, float(eff[at - 1]), float(fut[at - 1]), kind)


def first_crossings(
    deltas: np.ndarray, *, alpha_efficacy: float, alpha_futility: float, min_effect: float
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized :func:`run` over rows: (code, tasks used), code 1 = efficacy, −1 = futility, 0 = none."""
    deltas = np.atleast_2d(np.asarray(deltas, dtype=float))
    eff = efficacy_path(deltas) >= 1.0 / alpha_efficacy
    return _first(eff, futility_path(deltas, min_effect) >= 1.0 / alpha_futility)


def _first(eff: np.ndarray, fut: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of crossings, (code, tasks used) as :func:`first_crossings` answers."""
    eff, fut = np.atleast_2d(eff), np.atleast_2d(fut)
    steps = eff.shape[1]
    big = steps + 1
    # both can never cross at one step in practice; efficacy is the rarer claim, so it wins a tie
    at_e = np.where(eff.any(axis=1), eff.argmax(axis=1), big)
    at_f = np.where(fut.any(axis=1), fut.argmax(axis=1), big)
    code = np.where((at_e < big) & (at_e <= at_f), 1, np.where(at_f < big, -1, 0))
    used = np.where(code == 0, steps, np.minimum(at_e, at_f) + 1)
    return code, used


def exhaustion_p(
    deltas: np.ndarray, *, alpha_efficacy: float, n_resamples: int = 20000, seed: int = 0
) -> tuple[int, int]:
    """The p-value (numerator, denominator) of a sequential gate that reached the end of val without
    crossing: the share of sign flips of the observed magnitudes (in order) whose path crosses 1/α_e or
    whose sum is at least the observed (seeded Monte Carlo, +1, ties against the candidate).

    T = ∞ on a crossing, else Σ d; a crossing has p ≤ α_e < α (Ville), so early accepts and the accept at
    exhaustion are one test at level α, calibrated jointly rather than by splitting α."""
    d = np.asarray(deltas, dtype=float)
    if d.size == 0 or not np.any(d):
        return 1, 1
    observed = float(np.sum(d))
    magnitude = np.abs(d)
    tolerance = 1e-12 * float(np.sum(magnitude))
    count = 0
    for signs in sign_flips(d.size, n_resamples, seed):
        x = signs * magnitude
        crossed = np.any(efficacy_path(x) >= 1.0 / alpha_efficacy, axis=1)
        count += int(np.sum(crossed | (np.sum(x, axis=1) >= observed - tolerance)))
    return count + 1, n_resamples + 1
