"""How numbers read, the same in every table: a missing number is "—", never 0."""

from __future__ import annotations

from collections.abc import Sequence


def num(value: float | None, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def interval(ci: Sequence[float] | None, spec: str = "+.3f") -> str:
    return "—" if ci is None else f"[{ci[0]:{spec}}, {ci[1]:{spec}}]"
