"""Whether more rollouts fit the run's budget: the ceilings and the pure affordability check.

Pure, so a planner can refuse before paying a plan that would cross a ceiling at the run's measured
$/rollout."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..._project.spec import Spec
from . import stop_condition as sc
from .stop_condition import ITERATIONS, ROLLOUTS, STALL, USD

if TYPE_CHECKING:  # a type only: an xdist worker imports this module (fanout) and never numpy
    from ..._store.readers.evidence import ByTag

UNKNOWN = "unknown"

# A stop condition's caps tighten the spec ceiling of the same quantity.
_CAP_CEILING = {USD: "max_usd", ROLLOUTS: "max_metric_calls", ITERATIONS: "max_iterations", STALL: "stall"}


@dataclass(frozen=True)
class Ceilings:
    """Budget ceilings (None = none); ``sources``: where a limit came from when not the spec's own key."""

    max_metric_calls: float | None = None
    max_usd: float | None = None
    max_iterations: float | None = None
    stall: float | None = None
    sources: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_spec(cls, spec: Spec, condition: sc.StopCondition | None = None) -> Ceilings:
        limits: dict[str, float | None] = {name: getattr(spec, name) for name in _CAP_CEILING.values()}
        sources: dict[str, str] = {}
        for p in condition.predicates if condition is not None else ():
            name = _CAP_CEILING.get(p.kind)
            if name is None or p.number is None:
                continue
            current = limits[name]
            if current is None or p.number < current:
                limits[name] = int(p.number) if name != "max_usd" and p.number.is_integer() else p.number
                sources[name] = f"stop_condition {p.clause!r}"
        return cls(**limits, sources=tuple(sorted(sources.items())))

    def source(self, name: str) -> str:
        return dict(self.sources).get(name, f"spec {name}")

    def named(self, name: str) -> str:
        limit = getattr(self, name)
        where = dict(self.sources).get(name)
        return f"{name}={limit:g}" + (f" (from {where})" if where else "")


@dataclass(frozen=True)
class Affordability:
    """Whether more rollouts fit: True, False (``blockers`` name each ceiling crossed) or ``"unknown"`` (no
    rollout measured yet, or unmetered rollouts under ``max_usd``)."""

    rollouts_needed: int
    usd_per_rollout: float | None
    usd_needed: float | None
    affordable: bool | str
    runner_spend_metered: bool | None
    blockers: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "usd_per_rollout": money(self.usd_per_rollout),
            "usd_needed": money(self.usd_needed),
        }


def money(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def afford(
    rollouts_needed: int,
    *,
    rollouts_spent: int,
    runner_usd_spent: float,
    ceilings: Ceilings,
    optimizer_usd_spent: float = 0.0,
    decisions_needed: int = 0,
    iterations: int = 0,
    stall: int = 0,
    optimizer_usd_per_decision: float | None = None,
) -> Affordability:
    """Would ``rollouts_needed`` more rollouts and ``decisions_needed`` decisions cross a ceiling? $ is
    projected at the measured runner $/rollout plus the optimizer's $/decision when known."""
    blockers: list[dict[str, Any]] = []
    notes: list[str] = []
    metered: bool | None = None
    rate: float | None = None
    if rollouts_spent > 0:
        rate = runner_usd_spent / rollouts_spent
        metered = runner_usd_spent > 0
        if not metered:
            notes.append(
                f"{rollouts_spent} rollouts cost $0: the adapter reports no cost_usd — unmetered, "
                "not free; cap the run with max_metric_calls"
            )
    else:
        notes.append("no rollout yet: the $ per rollout is not measured, so affordability is unknown")

    def block(name: str, used: Any, needed: Any, message: str) -> None:
        blockers.append(
            {
                "ceiling": name,
                "source": ceilings.source(name),
                "used": used,
                "needed": needed,
                "limit": getattr(ceilings, name),
                "message": f"{message} {ceilings.named(name)}",
            }
        )

    cap = ceilings.max_metric_calls
    if cap is not None and rollouts_spent + rollouts_needed > cap:
        text = f"{rollouts_spent} + {rollouts_needed} rollouts >"
        block("max_metric_calls", rollouts_spent, rollouts_needed, text)
    usd_needed: float | None = None
    if rate is not None:
        usd_needed = rollouts_needed * rate
        if optimizer_usd_per_decision is not None:
            usd_needed += decisions_needed * optimizer_usd_per_decision
    usd_spent = runner_usd_spent + optimizer_usd_spent
    if ceilings.max_usd is not None:
        over_now = usd_spent >= ceilings.max_usd and (rollouts_needed > 0 or decisions_needed > 0)
        over_after = usd_needed is not None and metered and usd_spent + usd_needed > ceilings.max_usd
        if over_now or over_after:
            projected = usd_spent + (usd_needed or 0.0)
            text = f"${usd_spent:.4f} spent + ${usd_needed or 0.0:.4f} needed = ${projected:.4f} >"
            block("max_usd", money(usd_spent), money(usd_needed), text)
    if ceilings.max_iterations is not None and iterations + decisions_needed > ceilings.max_iterations:
        text = f"{iterations} + {decisions_needed} decisions >"
        block("max_iterations", iterations, decisions_needed, text)
    if ceilings.stall is not None and stall >= ceilings.stall:
        block("stall", stall, 0, f"{stall} rejects in a row: the run has stalled,")

    affordable: bool | str
    if blockers:
        affordable = False
    elif rollouts_spent == 0:
        affordable = UNKNOWN
    elif ceilings.max_usd is not None and not metered:
        affordable = UNKNOWN
        notes.append("max_usd cannot be checked: the runner's spend is not metered")
    else:
        affordable = True
    return Affordability(rollouts_needed, rate, usd_needed, affordable, metered, blockers, notes)


def missing_rollouts(records: ByTag, tags: Iterable[str], task_ids: Sequence[str], num_trials: int) -> int:
    """Rollouts still owed for ``tags`` on these tasks (an infra error counts as missing)."""
    cells = [(task_id, k) for task_id in task_ids for k in range(num_trials)]
    return sum(
        record is None or record.infra_error is not None
        for tag in tags
        for record in (records.get(tag, {}).get(cell) for cell in cells)
    )
