"""The verdict's types: how to gate (:class:`GateConfig`) and what a gate decided (:class:`Verdict`).

No numpy: the spec reads its gate defaults from here when the plugin loads."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from fractions import Fraction
from typing import Any

ACCEPT, REJECT, INDECISIVE = "accept", "reject", "indecisive"
# Which drops of a task the best passed count as regressions (the verdict's list, and what
# --capevolve-veto-regressions vetoes): "noise", a drop beyond twice its own noise; "strict",
# the design's "lowers any val task the parent scored higher on" — any drop, exactly.
REGRESSION_RULES = ("noise", "strict")


class GateSplitError(ValueError):
    """Raised when anything but val is gated on: train is edited against and test is sealed."""


@dataclass(frozen=True)
class GateConfig:
    """How to gate; :class:`~.._project.spec.Spec` reads its defaults from here."""

    mode: str = "exact"
    alpha: float | Fraction = 0.05  # a Fraction when a round splits α (Holm: α/k)
    k_se: float = 1.0
    threshold: float = 0.0
    min_coverage: float = 0.8
    veto_regressions: bool = False
    regression_rule: str = "noise"  # one of REGRESSION_RULES
    guarded_tasks: tuple[str, ...] = ()  # stop_condition guards: an accept never lowers these
    success_threshold: float = 1.0
    seed: int = 0
    # each task's cluster, in the order of the gate's rows (empty: every task its own): the
    # exact rule then flips whole clusters, and the interval is cluster-robust (_stats/clusters)
    clusters: tuple[str, ...] = ()
    # a margin changes the question (_stats/margin.py): "no worse than margin" (δ in (−1, 0);
    # 0 keeps the superiority test) or, with equivalence m > 0, "within ±m" (TOST)
    margin: float = 0.0
    equivalence: float = 0.0
    # ``pairwise`` mode: each judged task's net preference (B wins − A wins, B the candidate),
    # logged judgements of a gate session (_policy/gate/judge.py); None: none were judged
    preferences: tuple[int, ...] | None = None


@dataclass
class Verdict:
    """A gate's verdict with every number it was decided on (defaults: a refusal before any rollout)."""

    tag: str
    against: str
    decision: str
    basis: str
    reason: str
    mode: str
    min_coverage: float
    alpha: float | None = None
    k_se: float | None = None
    n_tasks: int = 0
    trials: int = 0
    delta_mean: float | None = None
    delta_exact: str | None = None  # Δ̄ as the fraction it is ("7/18"): the null floor's comparison
    se: float | None = None
    ci: list[float] | None = None
    ci_method: str | None = None  # t (cluster_t by clusters); older verdicts may say bca_bootstrap or normal
    p_value: float | None = None
    p_exact: str | None = None  # "n/d": the p (exact methods) or an upper bound on it (float tails)
    p_method: str | None = None  # how p was reached: one of _stats.sign_flip.METHODS
    bar: float | None = None
    null_spread: float | None = None
    null_spread_exact: str | None = None  # the nulls' max |Δ̄| as a fraction
    coverage: dict[str, float] = field(default_factory=dict)
    footprint: list[str] = field(default_factory=list)
    regressions: list[dict[str, Any]] = field(default_factory=list)
    regression_rule: str = "noise"  # which drops the list holds (REGRESSION_RULES)
    guards: list[dict[str, Any]] = field(default_factory=list)  # stop_condition guards checked
    infra_errors: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    per_task: dict[str, dict[str, float | None]] = field(default_factory=dict)
    split: str = "val"
    details: dict[str, Any] = field(default_factory=dict)  # what a refusal was decided on
    verdict_stable: bool | None = None  # the same decision with any one task left out?
    directionally_positive_but_inconclusive: bool = False  # Δ̄ > 0, not accepted
    # the judge's and the agent's shares of Var(Δ̄), for a run whose scorer is re-scored
    # (judge_rescores > 1: _policy/gate/judge.py)
    judge_noise: dict[str, Any] | None = None
    margin: dict[str, Any] | None = None  # the margin test's question, p, bounds and method

    def to_dict(self) -> dict[str, Any]:
        """What ``dataclasses.asdict`` gives, without its deep copy of every number (50,000 of them at
        10,000 tasks)."""
        data = {name: _plain(getattr(self, name)) for name in _FIELD_NAMES}
        for name in _ABSENT_WHEN_NONE:
            if data[name] is None:
                del data[name]
        return data


_ATOMIC = frozenset({str, int, float, bool, type(None)})  # what copy.deepcopy returns as they are


def _plain(value: Any) -> Any:
    """``asdict``'s copy of one value: plain containers walked here, anything else handed to ``asdict``."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is dict:
        return {_plain(key): _plain(item) for key, item in value.items()}
    if kind is list:
        return [_plain(item) for item in value]
    return asdict(_Boxed(value))["value"]


@dataclass
class _Boxed:
    value: Any


_FIELD_NAMES = tuple(f.name for f in fields(Verdict))
# left out of the dict when None, so the verdict files of runs that never set them are as they were
_ABSENT_WHEN_NONE = ("judge_noise", "margin")
