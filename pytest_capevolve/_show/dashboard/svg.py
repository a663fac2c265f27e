"""The few SVG pieces the plots are drawn with: escaping, linear scales, axes, a colour ramp.

Every text that reaches the page goes through :func:`esc`: task ids, feedback and model output
are untrusted, so they can only ever be text — never markup, an attribute or a script."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def f(value: float) -> str:
    """A coordinate: two decimals, no trailing noise (keeps the file small and stable)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


@dataclass(frozen=True)
class Scale:
    """Linear map from a data domain to pixels (a degenerate domain maps to the range's start)."""

    lo: float
    hi: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        if self.hi == self.lo:
            return self.start
        return self.start + (value - self.lo) / (self.hi - self.lo) * (self.end - self.start)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round-numbered ticks covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    value = math.ceil(lo / step - 1e-9) * step
    ticks = []
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def svg_open(width: float, height: float, cls: str, label: str) -> str:
    return (
        f'<svg class="{esc(cls)}" xmlns="http://www.w3.org/2000/svg" width="{f(width)}" '
        f'height="{f(height)}" viewBox="0 0 {f(width)} {f(height)}" role="img" aria-label="{esc(label)}">'
    )


def text(x: float, y: float, content: object, cls: str = "", anchor: str = "start", rotate: float = 0) -> str:
    transform = f' transform="rotate({f(rotate)} {f(x)} {f(y)})"' if rotate else ""
    klass = f' class="{esc(cls)}"' if cls else ""
    return f'<text x="{f(x)}" y="{f(y)}" text-anchor="{anchor}"{klass}{transform}>{esc(content)}</text>'


def line(x1: float, y1: float, x2: float, y2: float, cls: str) -> str:
    return f'<line class="{esc(cls)}" x1="{f(x1)}" y1="{f(y1)}" x2="{f(x2)}" y2="{f(y2)}"/>'


def polyline(points: Sequence[tuple[float, float]], cls: str) -> str:
    coords = " ".join(f"{f(x)},{f(y)}" for x, y in points)
    return f'<polyline class="{esc(cls)}" points="{coords}"/>'


def title(content: object) -> str:
    """A native tooltip (no script): the element's hover text."""
    return f"<title>{esc(content)}</title>"


def distinct_labels(ticks: Sequence[float]) -> list[str]:
    """The ticks written with the fewest decimals (up to 4) that say each one exactly."""
    for decimals in range(5):
        labels = [f"{tick:.{decimals}f}" for tick in ticks]
        pairs = zip(labels, ticks, strict=True)
        if all(abs(float(label) - tick) <= 1e-9 * max(1.0, abs(tick)) for label, tick in pairs):
            return labels
    return [f"{tick:.4g}" for tick in ticks]


def y_axis(scale: Scale, x: float, ticks: Sequence[float], width: float) -> str:
    """Horizontal grid lines with labels left of ``x``."""
    parts = []
    for tick, label in zip(ticks, distinct_labels(ticks), strict=True):
        y = scale(tick)
        parts.append(line(x, y, x + width, y, "grid"))
        parts.append(text(x - 6, y + 4, label, "tick", "end"))
    return "".join(parts)


def x_axis(scale: Scale, y: float, ticks: Sequence[tuple[float, str]]) -> str:
    parts = [line(scale.start, y, scale.end, y, "axis")]
    for value, label in ticks:
        x = scale(value)
        parts.append(line(x, y, x, y + 4, "axis"))
        parts.append(text(x, y + 16, label, "tick", "middle"))
    return "".join(parts)


# red (0) → yellow → green (1): a failing task reads red, a missing one is hatched grey
_RAMP = ((0.0, (215, 48, 39)), (0.5, (254, 224, 139)), (1.0, (26, 152, 80)))


def reward_colour(value: float) -> str:
    value = min(1.0, max(0.0, value))
    (a, ca), (b, cb) = next(pair for pair in zip(_RAMP, _RAMP[1:], strict=False) if value <= pair[1][0])
    t = (value - a) / (b - a)
    return "#{:02x}{:02x}{:02x}".format(*(round(x + (y - x) * t) for x, y in zip(ca, cb, strict=True)))
