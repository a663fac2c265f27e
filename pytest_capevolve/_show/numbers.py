"""How numbers read, the same in every table: a missing number is "—", never 0."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def num(value: float | None, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def usd(amount: float, rollouts: int) -> str:
    """What ``rollouts`` cost the runner: "unmetered" where they cost $0 (the adapter reports no
    ``cost_usd``), which a 0.0000 would show as free."""
    return "unmetered" if rollouts and not amount else f"{amount:.4f}"


def interval(ci: Sequence[float] | None, spec: str = "+.3f") -> str:
    return "—" if ci is None else f"[{ci[0]:{spec}}, {ci[1]:{spec}}]"


def rounded(value: Any, digits: int) -> Any:
    """A report with every float rounded for printing (``-0.22000000000000003`` is -0.22)."""
    if isinstance(value, float):
        return round(value, digits) + 0.0  # + 0.0: never "-0.0"
    if isinstance(value, dict):
        return {key: rounded(item, digits) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(item, digits) for item in value]
    return value


def aligned(rows: Sequence[Sequence[str]], left: int) -> list[str]:
    """Rows as fixed-width columns, the first ``left`` flush left and the rest flush right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
