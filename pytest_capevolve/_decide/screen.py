"""Subset screens — the promotion ladder: which val tasks a screen pays for, and kill or promote.

A screen gates a candidate on part of val (tier 1 | 2 | 3 = 25 | 50 | 75 %, at least :data:`MIN_TASKS`
tasks) against the best's persisted rollouts on the same tasks and seeds; it never accepts. A kill needs
proven harm (a one-sided exact sign-flip test) or ceiling arithmetic (even if every unscreened task passed,
the full-val gate would not accept); a promote means "could not prove harm", not "good".

The subset is chosen from the best's first trial and harm is tested on its other trials only
(:func:`held_out`): the rollouts that chose the tasks would read regression to the mean as harm
(``benchmarks/screening.py``). A climb's tiers test nested data, so ``screen_alpha`` is split across them
(:func:`tier_alpha`; ``tests/calibration/test_screen_climb.py``). Each tier's subset is a prefix of the
next one's, so a climb never pays a rollout twice. Pure: ``_session/subset_screen.py`` pays and persists."""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .. import _stats as stats
from .alpha_budget import look_alpha
from .basis import Basis
from .gate import decide
from .verdict import ACCEPT, GateConfig

TIERS = {1: Fraction(1, 4), 2: Fraction(1, 2), 3: Fraction(3, 4)}
MIN_TASKS = 6
KILL, PROMOTE = "kill", "promote"
HARM, CEILING, NO_HARM = "harm", "ceiling", "no_proven_harm"
# a kill's basis → the reject basis `capevolve commit` books it under
COMMIT_BASIS = {HARM: Basis.SCREEN_KILL, CEILING: Basis.CEILING}


def _share(tier: int) -> Fraction:
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(map(str, TIERS))}, got {tier!r}")
    return TIERS[tier]


def screen_size(n_val: int, tier: int) -> int:
    """Tasks a tier pays for: its share of val rounded up, at least MIN_TASKS, at most all of val."""
    return min(n_val, max(MIN_TASKS, math.ceil(_share(tier) * n_val)))


def tier_alpha(screen_alpha: float | Fraction, tier: int) -> Fraction:
    """The level a tier's harm test is decided at: ``screen_alpha`` split α/2, α/4, α/4 across the three
    tiers, as grow splits it across looks."""
    _share(tier)
    return look_alpha(screen_alpha, tier, len(TIERS))


def selection_trials(num_trials: int) -> int:
    """How many of the best's first trials choose the subset: one when there are more, so the harm test never
    reads the rollouts that chose the tasks."""
    return 1 if num_trials > 1 else 0


def held_out(matrix: np.ndarray, num_trials: int) -> np.ndarray:
    return stats.as_matrix(matrix)[:, selection_trials(num_trials) :]


def selection_means(best: np.ndarray, task_ids: Sequence[str], num_trials: int) -> dict[str, float]:
    """The best's per-task means over its selection trials (what :func:`ladder` orders by); with one trial per
    task every valid task reads ½ and the ladder is the seeded shuffle."""
    best = stats.as_matrix(best)
    valid = ~np.isnan(best).all(axis=1)
    chosen = best[:, : selection_trials(num_trials)]
    seen = stats.task_means(chosen) if chosen.shape[1] else np.full(best.shape[0], np.nan)
    means = np.where(np.isnan(seen), 0.5, seen)  # no selection trial valid: no information
    return {t: float(m) for t, m, ok in zip(task_ids, means.tolist(), valid.tolist(), strict=True) if ok}


def ladder(best_means: Mapping[str, float], run_id: str, tag: str) -> list[str]:
    """Every task in screening order for this run and candidate; tier N screens a prefix: the best's failures
    first (where a fix shows), every third slot a seeded holdout of its passes (where a regression shows),
    then the tasks whose rate is closest to ½."""
    digest = hashlib.sha256(f"capevolve-screen:{run_id}:{tag}".encode()).hexdigest()
    rng = random.Random(int(digest[:16], 16))
    tie = {t: rng.random() for t in sorted(best_means)}
    # failures the best sometimes passes first: a task it never passes can show neither a
    # regression nor, usually, a fix
    fails = sorted((t for t, m in best_means.items() if m < 0.5), key=lambda t: (-best_means[t], tie[t]))
    passes = sorted(t for t, m in best_means.items() if m >= 0.5)
    holdout = sorted(passes, key=lambda t: tie[t])
    rest = sorted(passes, key=lambda t: (abs(best_means[t] - 0.5), tie[t]))
    queues = {"fails": fails, "holdout": holdout, "rest": rest}
    order: list[str] = []
    chosen: set[str] = set()

    def take(*names: str) -> str | None:
        for name in names:
            queue = queues[name]
            while queue and queue[0] in chosen:
                queue.pop(0)
            if queue:
                return queue.pop(0)
        return None

    while len(order) < len(best_means):
        slot = len(order)
        pick = take("holdout", "fails", "rest") if slot % 3 == 2 else take("fails", "rest", "holdout")
        assert pick is not None  # some queue still holds every unchosen task
        order.append(pick)
        chosen.add(pick)
    return order


def select(best_means: Mapping[str, float], run_id: str, tag: str, tier: int) -> list[str]:
    return ladder(best_means, run_id, tag)[: screen_size(len(best_means), tier)]


@dataclass(frozen=True)
class ScreenResult:
    decision: str  # kill | promote
    basis: str  # harm | ceiling | no_proven_harm
    reason: str
    n_tasks: int
    delta_mean: float | None
    p_harm: float
    p_harm_exact: str
    alpha: float  # the level the harm test was decided at (the tier's share of screen_alpha)
    ceiling_p: float | None  # the full-val gate's p with every unscreened task passing

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def optimistic_completion(candidate_subset: np.ndarray, subset_rows: Sequence[int], n_val: int) -> np.ndarray:
    """The candidate's full-val matrix if every unscreened task (and missing trial) passed."""
    trials = candidate_subset.shape[1]
    full = np.ones((n_val, trials))
    full[list(subset_rows)] = np.nan_to_num(candidate_subset, nan=1.0)
    return full


def decide_screen(
    candidate: np.ndarray,
    best: np.ndarray,
    *,
    alpha: float | Fraction,
    best_full: np.ndarray | None = None,
    subset_rows: Sequence[int] = (),
    gate: GateConfig | None = None,
    seed: int = 0,
    num_trials: int | None = None,
    gate_level: float | Fraction | None = None,
) -> ScreenResult:
    """Kill or promote from the subset's reward matrices. ``num_trials`` (None: tasks picked by hand): the
    trials per task the subset was chosen with, so the harm test reads only the held-out ones. ``best_full``,
    ``subset_rows`` and ``gate`` enable the ceiling kill, for the ``exact`` gate only (its p only falls as
    the candidate's reward rises, so the optimistic completion is the best case). The ceiling is tested at
    ``gate``'s α, which no decision of the run exceeds; a kill quotes ``gate_level``, the α the gate's next
    decision gets under the run's schedule, which that p exceeds too."""
    candidate, best = stats.as_matrix(candidate), stats.as_matrix(best)
    deltas, _ = stats.paired_deltas(candidate, best)
    delta_mean = float(np.mean(deltas)) if deltas.size else None
    tested = (candidate, best)
    if num_trials is not None:  # chosen on the best's first trial: test on the others only
        tested = (held_out(candidate, num_trials), held_out(best, num_trials))
    tested_deltas, _ = stats.paired_deltas(*tested)
    # the harm test: one-sided, exact, that the candidate is worse (the arms swapped)
    harm = stats.sign_flip_test(tested[1], tested[0], alpha=float(alpha), seed=seed)
    shown = "n/a" if delta_mean is None else f"{delta_mean:+.4f}"

    proven = bool(tested_deltas.size) and harm.at_most(alpha)
    optimistic = None
    if not proven and best_full is not None and gate is not None and gate.mode == "exact" and deltas.size:
        best_full = stats.as_matrix(best_full)
        completed = optimistic_completion(candidate, subset_rows, best_full.shape[0])
        ids = [f"t{i}" for i in range(best_full.shape[0])]
        optimistic = decide(completed, best_full, tag="ceiling", against="best", task_ids=ids, config=gate)
    if proven:
        decision, basis = KILL, HARM
        reason = (
            f"proven harm on {deltas.size} screened tasks: one-sided p(worse) = {harm.p_value:.4g} "
            f"≤ α = {float(alpha):g} (Δ̄ = {shown})"
        )
    elif optimistic is not None and optimistic.decision != ACCEPT and optimistic.basis == Basis.EXACT:
        assert gate is not None and optimistic.p_value is not None
        decision, basis = KILL, CEILING
        level = gate.alpha if gate_level is None or optimistic.p_value <= gate_level else gate_level
        reason = (
            f"ceiling: even if every unscreened task passed every trial, the full-val gate "
            f"would not accept (p = {optimistic.p_value:.4g} > α = {float(level):.4g}); "
            f"Δ̄ on the subset = {shown}"
        )
    else:
        decision, basis = PROMOTE, NO_HARM
        reason = (
            f"promote: harm not proven on {deltas.size} screened tasks (one-sided p(worse) = "
            f"{harm.p_value:.4g} > α = {float(alpha):g}, Δ̄ = {shown}); this says nothing about an improvement"
        )
    return ScreenResult(
        decision,
        basis,
        reason,
        n_tasks=int(deltas.size),
        delta_mean=delta_mean,
        p_harm=harm.p_value,
        p_harm_exact=f"{harm.numerator}/{harm.denominator}",
        alpha=float(alpha),
        ceiling_p=None if optimistic is None else optimistic.p_value,
    )


def ledger(
    screen_events: Iterable[Mapping[str, Any]], val_paid: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The run's screen ledger from its ``screen`` events: kills, promotes, rollouts fired, saved and
    ``net_rollouts`` = saved − fired. A screen run again counts once, by its latest decision. A kill saves the
    full-val rollouts it was never paid: with ``val_paid`` (val rollouts per tag), whatever was paid beyond
    its screens' own is not saved. A promote's screen rollouts count as spent, though its gate reuses them."""
    fired_by_tag: Counter[str] = Counter()
    latest: dict[tuple[str, str], Mapping[str, Any]] = {}
    for event in screen_events:
        tag = str(event.get("tag"))
        fired_by_tag[tag] += int(event.get("fired", 0))
        latest[(tag, str(event.get("screen")))] = event
    fired = fired_by_tag.total()
    decisions = Counter(e.get("decision") for e in latest.values())
    kills, promotes = decisions[KILL], decisions[PROMOTE]
    saved = 0
    for tag, event in {tag: e for (tag, _), e in latest.items() if e.get("decision") == KILL}.items():
        beyond = 0 if val_paid is None else max(0, int(val_paid.get(tag, 0)) - fired_by_tag[tag])
        saved += max(0, int(event.get("full_val_rollouts", 0)) - beyond)
    net = saved - fired
    out: dict[str, Any] = {
        "screens": kills + promotes,
        "kills": kills,
        "promotes": promotes,
        "fired": fired,
        "saved": saved,
        "net_rollouts": net,
    }
    if kills + promotes:
        out["verdict"] = (
            f"screening saved {net} rollouts net"
            if net >= 0
            else f"screening was pure overhead: {-net} rollouts more than it saved"
        )
    return out


def breakeven_kill_rate(fired: int, full_val_rollouts: int) -> float | None:
    """The share of screened candidates a screen like this must kill to pay for itself."""
    return None if full_val_rollouts <= 0 else fired / full_val_rollouts


def ledger_line(ledger: Mapping[str, Any], what: str = "subset screens") -> str:
    """:func:`ledger` in one line, as a screen session, ``capevolve spend`` and ``measure`` say it."""
    return (
        f"{what}: {ledger['kills']} killed, {ledger['promotes']} promoted; {ledger['fired']} rollouts "
        f"fired, {ledger['saved']} saved, net {ledger['net_rollouts']:+d}"
        + (f" — {ledger['verdict']}" if ledger.get("verdict") else "")
    )
