"""Bets on each task's whole paired outcome: the sequential gate's efficacy e-process (issue 40).

Task t multiplies the wealth by 1 + θ(a_t, b_t), (a, b) the candidate's and the best's successes over the
k binary trials valid on both sides (trial j against trial j), θ(a, b) = (p(a, b) − p(b, a)) / (p(a, b) +
p(b, a)) for a *design* law p fixed in advance (:func:`design_law`: the synthetic mix of task rates, the
candidate's lifted by +0.10 over each task's headroom). Given the unordered pair {a, b}, each order is
equally likely when the arms are exchangeable within a task (a byte-identical candidate, common seeds), and
θ is antisymmetric, so every factor has mean exactly 1: the wealth is a nonnegative martingale whatever the
per-task rates, and by Ville's inequality it reaches 1/α with probability ≤ α at any stopping time. Any
design keeps that; one near the truth spends less. A task whose rewards are not all 0 or 1 (graded) bets on
its delta instead, as the delta e-process does (:func:`.sequential.bets`, its bet predictable from the
deltas before it): its factor 1 + λ·d has mean 1 under the same swap, so the mixed product stays a
martingale. Which kind a task bets is read from what a swap leaves unchanged (its valid trials, binary or
not), so the choice never depends on the order.

At the end of val without a crossing, :func:`swap_p` is the joint p: task-level swaps of (a, b), each
replaying the whole path (T = ∞ on a crossing, else the final log-wealth), seeded, +1 — the outcome bets'
twin of :func:`.sequential.exhaustion_p`, so early and final accepts are one test at level α.

Pure: numpy only (the binomial law by hand, the mix's integral by Gauss–Legendre), no run dir."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from . import sequential as seq
from .sign_flip import sign_flips

DESIGN_EFFECT = 0.10  # the effect the bets are sized for (session 24: the cheapest that keeps +0.05)
MAX_THETA = 0.9  # |θ| cap, as the delta bets' MAX_BET: every factor ≥ 0.1; symmetric, so still fair
# log-wealth tolerance: a path crosses ln(1/α) only at ln(1/α) + TOLERANCE; a swap counts against the
# candidate from ln(1/α) − TOLERANCE, or at a final log-wealth ≥ the observed − TOLERANCE (both favour reject)
TOLERANCE = 1e-9
QUADRATURE = 200  # Gauss–Legendre nodes per third of the design mix


@dataclass(frozen=True)
class Outcomes:
    """The tasks a tag's e-process reads, in its order: each task's delta of means (``deltas``), whether
    it bets on its outcome (``outcome``; else on its delta), its outcome bet θ (0 for a delta task) and the
    trials per side that bet was read at (0 for a delta task)."""

    deltas: np.ndarray
    outcome: np.ndarray
    theta: np.ndarray
    trials: np.ndarray

    @property
    def size(self) -> int:
        return int(self.deltas.size)


def outcomes(
    deltas: list[float], pairs: list[tuple[int, int, int] | None], effect: float = DESIGN_EFFECT
) -> Outcomes:
    """Tasks from their deltas and, for one that bets on its outcome, its (a, b, k); None bets the delta."""
    theta = [0.0 if p is None or p[2] == 0 else float(design_theta(p[2], effect)[p[0], p[1]]) for p in pairs]
    return Outcomes(
        np.asarray(deltas, dtype=float),
        np.array([p is not None for p in pairs], dtype=bool),
        np.asarray(theta, dtype=float),
        np.array([0 if p is None else p[2] for p in pairs], dtype=int),
    )


def bet_kind(read: Outcomes) -> str:
    """``outcome`` when every task read bet on its outcome, ``delta`` when none did, else both."""
    if read.outcome.all():
        return "outcome"
    return "delta" if not read.outcome.any() else "outcome+delta"


@cache
def design_mix() -> tuple[np.ndarray, np.ndarray]:
    """The design's task rates and their weights: a third Beta(0.5, 6), a third Beta(6, 0.5), a third
    uniform (the synthetic mix of ``benchmarks/cost_per_decision.py``), as Gauss–Legendre nodes. The Beta
    thirds are integrated in u with r = u² (1 − u² for the upper), which takes their r^(−½) pole away."""
    x, w = np.polynomial.legendre.leggauss(QUADRATURE)
    u, w = (x + 1) / 2, w / 2
    near = w * 2 * (1 - u * u) ** 5  # Beta(0.5, 6)'s density in u, up to its constant
    near = near / near.sum()
    rates = np.concatenate([u * u, 1 - u * u, u])
    weights = np.concatenate([near, near, w / w.sum()]) / 3
    rates.setflags(write=False)
    weights.setflags(write=False)
    return rates, weights


def lifted(rates: np.ndarray, effect: float, weights: np.ndarray | None = None) -> np.ndarray:
    """Rates raised by ``effect`` on average (over the last axis, ``weights`` or uniform), spread over
    each rate's headroom."""
    rates = np.asarray(rates, dtype=float)
    if not effect:
        return rates
    headroom = 1 - rates
    if weights is None:
        scale = headroom.mean(axis=-1, keepdims=True)
    else:
        scale = np.sum(headroom * weights, axis=-1, keepdims=True)
    return np.asarray(np.clip(rates + effect * headroom / np.maximum(scale, 1e-9), 0, 1))


def binomial(trials: int, rates: np.ndarray) -> np.ndarray:
    """P(j successes of ``trials``) for every rate (rows) and j = 0 … trials (columns)."""
    grid = np.arange(trials + 1)
    comb = np.array([math.comb(trials, j) for j in grid], dtype=float)
    r = np.asarray(rates, dtype=float)[:, None]
    return np.asarray(comb * r**grid * (1 - r) ** (trials - grid))


def outcome_law(
    rates: np.ndarray, effect: float, trials: int, weights: np.ndarray | None = None
) -> np.ndarray:
    """P(a, b): the candidate's a and the best's b successes of ``trials`` on one task whose rate is drawn
    from ``rates`` (with ``weights``, or uniformly), the candidate's lifted by ``effect`` — a (trials + 1)²
    array summing to 1."""
    rates = np.asarray(rates, dtype=float)
    w = np.full(rates.size, 1 / rates.size) if weights is None else np.asarray(weights, dtype=float)
    cand = binomial(trials, lifted(rates, effect, w))
    best = binomial(trials, rates)
    return np.asarray((cand * w[:, None]).T @ best)


def exchangeable(law: np.ndarray) -> np.ndarray:
    """The law nearest ``law`` in KL(law ‖ ·) under which the arms are exchangeable: (p + pᵀ) / 2."""
    return np.asarray((law + law.T) / 2)


def design_law(trials: int, effect: float = DESIGN_EFFECT) -> np.ndarray:
    """The design alternative's outcome law at ``trials`` a task: the synthetic mix, lifted by ``effect``."""
    rates, weights = design_mix()
    return outcome_law(rates, effect, trials, weights)


@cache
def design_theta(trials: int, effect: float = DESIGN_EFFECT) -> np.ndarray:
    """θ(a, b) for every (a, b) at ``trials`` per task (read-only, computed once per trials count):
    antisymmetric by construction (θᵀ = −θ exactly), capped at ±:data:`MAX_THETA`; 0 where the design
    gives both orders no probability."""
    if trials < 1:
        raise ValueError(f"trials must be ≥ 1, got {trials}")
    p = design_law(trials, effect)
    both = p + p.T
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = np.where(both > 0, (p - p.T) / both, 0.0)
    theta = np.clip(theta, -MAX_THETA, MAX_THETA)
    theta.setflags(write=False)
    return theta


def design_steps(trials: int, effect: float = DESIGN_EFFECT) -> np.ndarray:
    """The design table: log(1 + θ(a, b)), the log-factor a task's outcome (a, b) multiplies the wealth by."""
    return np.asarray(np.log1p(design_theta(trials, effect)))


def worst_theta(
    cand: tuple[int, int], best: tuple[int, int], trials: int, effect: float = DESIGN_EFFECT
) -> float:
    """The smallest θ a task can bet when some of its trials are unknown: the candidate has (successes,
    unknown trials), the best likewise, every trial's outcome otherwise free. The design's θ is not monotone
    in (a, b) (a task at 3 of 3 on both sides says less than one at 2 of 3), so "every unknown trial a
    failure of the candidate and a pass of the best" is not the worst case; this minimum is. With the bets
    fixed in advance each task's factor is its own, so the per-task minima bound every partial product."""
    theta = design_theta(trials, effect)
    (a, da), (b, db) = cand, best
    return float(theta[a : a + da + 1, b : b + db + 1].min())


def log_wealth(read: Outcomes, signs: np.ndarray | None = None) -> np.ndarray:
    """Log-wealth paths (rows × tasks): the tasks as read, or swapped where a row of ``signs`` is −1."""
    s = np.ones((1, read.size)) if signs is None else np.atleast_2d(signs).astype(float)
    steps = np.log1p(s * np.where(read.outcome, read.theta, 0.0))
    if not read.outcome.all():
        x = s * read.deltas
        steps = np.where(read.outcome, steps, np.log1p(seq.bets(x) * x))
    return np.asarray(np.cumsum(steps, axis=-1))


def crossed(path: np.ndarray, alpha: float) -> np.ndarray:
    """Where an observed log-wealth path has crossed ln(1/α), with :data:`TOLERANCE` against the candidate."""
    return np.asarray(path >= math.log(1 / alpha) + TOLERANCE)


def run(
    read: Outcomes, *, alpha_efficacy: float, alpha_futility: float, min_effect: float
) -> seq.SequentialState:
    """The tasks in order up to the first crossing: the outcome bets' wealth ≥ 1/α_e accepts; the delta
    futility e-process (:func:`.sequential.futility_path`, only ever a reject) ≥ 1/α_f rejects."""
    if read.size == 0:
        return seq.SequentialState(0, 1.0, 1.0, seq.UNDECIDED)
    path = log_wealth(read)[0]
    futility = seq.futility_path(read.deltas, min_effect)
    [code], [used] = seq.first(crossed(path, alpha_efficacy), futility >= 1.0 / alpha_futility)
    kind, at = {1: seq.EFFICACY, -1: seq.FUTILITY, 0: seq.UNDECIDED}[int(code)], int(used)
    return seq.SequentialState(at, math.exp(min(float(path[at - 1]), 700.0)), float(futility[at - 1]), kind)


def swap_p(
    read: Outcomes, *, alpha_efficacy: float, n_resamples: int = 20000, seed: int = 0
) -> tuple[int, int]:
    """The joint p (numerator, denominator) of a path that reached the end of val without crossing: the share
    of task-level swaps of (a, b) (each delta task's sign flipped with it) whose path crosses ln(1/α_e)
    anywhere or ends at a log-wealth ≥ the observed (seeded Monte Carlo, +1, ties against the candidate).
    Seeded, the p holds its level up to Monte Carlo error (:func:`monte_carlo_slack`)."""
    if read.size == 0 or not (np.any(read.theta) or np.any(read.deltas[~read.outcome])):
        return 1, 1
    observed = float(log_wealth(read)[0, -1])
    high = math.log(1 / alpha_efficacy) - TOLERANCE
    count = 0
    for signs in sign_flips(read.size, n_resamples, seed):
        paths = log_wealth(read, signs)
        count += int(np.sum((paths >= high).any(axis=1) | (paths[:, -1] >= observed - TOLERANCE)))
    return count + 1, n_resamples + 1


def monte_carlo_slack(n_resamples: int, alpha: float) -> float:
    """How far above α the share of orders a seeded :func:`swap_p` rejects may read: three binomial
    standard errors of a share α estimated from ``n_resamples`` swaps."""
    return 3 * math.sqrt(alpha * (1 - alpha) / n_resamples)
