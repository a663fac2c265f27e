"""What proposing a candidate cost: the optimizer's dollars, tokens and seconds, checked.

Booked with a decision and summed in ``state.json``, where ``max_usd`` counts it beside the runner's spend.
A negative, NaN, infinite or absurd value is refused in one line (a negative cost would give back budget)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..._store.log.event_kinds import DECISION, HILL_CLIMB_ITERATION
from ..._store.rundir import RunDir
from ...exitcodes import Refusal

# beyond these a report is a bug or a lie, not a spend
MAX_USD = 1e6
MAX_TOKENS = 10**12
MAX_SECONDS = 1e7


class SpendRefused(Refusal):
    """A reported optimizer spend is not a cost; the message names the value and the range."""


def checked_usd(value: object, where: str, name: str = "usd") -> float:
    return _number(value, where, name, MAX_USD)


def checked_tokens(value: object, where: str, name: str = "tokens") -> int:
    number = _number(value, where, name, MAX_TOKENS)
    if not number.is_integer():
        raise SpendRefused(f"{where}: {name}={value!r} is not a whole number of tokens")
    return int(number)


def _number(value: object, where: str, name: str, top: float) -> float:
    limit = f"[0, {top:.0e}]".replace("e+0", "e").replace("e+", "e")  # [0, 1e6]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpendRefused(f"{where}: {name}={value!r} is not a number: give one in {limit}")
    number = float(value)
    if math.isnan(number) or not 0 <= number <= top:
        raise SpendRefused(f"{where}: {name}={value!r} is not a spend: give a number in {limit}")
    return number


@dataclass(frozen=True)
class OptimizerSpend:
    """What proposing the candidate cost; refused at construction when any part is not a spend."""

    usd: float = 0.0
    tokens: int = 0
    seconds: float = 0.0

    def __post_init__(self) -> None:
        checked_usd(self.usd, "optimizer spend")
        checked_tokens(self.tokens, "optimizer spend")
        _number(self.seconds, "optimizer spend", "seconds", MAX_SECONDS)


def unbooked_usd(rundir: RunDir) -> float:
    """Dollars optimizers reported (``proposed`` events) for rounds not yet decided: spent already, so
    every ceiling check counts them."""
    decided = {str(e.get("tag")) for e in rundir.log.of_kinds(DECISION)}
    reported: dict[str, float] = {}
    for event in rundir.log.of_kinds(HILL_CLIMB_ITERATION):
        tag = str(event.get("tag"))
        if event.get("phase") == "proposed" and tag not in decided:
            usd = event.get("cost_usd")
            reported[tag] = float(usd) if isinstance(usd, (int, float)) and not isinstance(usd, bool) else 0.0
    return sum(max(0.0, usd) for usd in reported.values())
