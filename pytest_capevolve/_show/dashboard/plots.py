"""The dashboard's five plots, each an inline SVG string drawn from :class:`.model.Dashboard`, and
the few SVG pieces they are drawn with: escaping, linear scales, axes, a colour ramp.

Pure. Every element a reader (or a test) counts carries a class naming what it is. Every text that
reaches the page goes through :func:`esc`: task ids, feedback and model output are untrusted, so
they can only ever be text — never markup, an attribute or a script. Heatmap cells link to the
task's drill-down by row (``#task-<row>``), so no task id reaches an attribute."""

from __future__ import annotations

import html
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..numbers import interval, num
from .model import BestPoint, Dashboard, VerdictRow


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


DECISION_KINDS = ("seed", "accept", "reject", "indecisive", "inconclusive", "provisional")


def shout(decision: str) -> str:
    """A decision in capitals, its label (``accept (adopted: … at α = 0.05 …)``) as written."""
    word, space, label = decision.partition(" ")
    return word.upper() + space + label


def decision_class(decision: str | None) -> str:
    """A decision as a CSS class: one of a fixed set (a run dir's text never becomes a class)."""
    return decision if decision in DECISION_KINDS else "other"


def best_so_far_plot(points: list[BestPoint]) -> str:
    """The best's val mean after each decision with its 95% CI; each decided candidate's as a dot."""
    width, height, left, right, top, bottom = 620.0, 280.0, 48.0, 16.0, 16.0, 40.0
    last = max(1, points[-1].iteration if points else 1)
    x = Scale(0, last, left, width - right)
    y = Scale(0.0, 1.0, height - bottom, top)
    every = -(-last // 10)  # at most 11 ticks
    parts = [svg_open(width, height, "plot best-so-far", "best so far on val over iterations")]
    parts.append(y_axis(y, left, [0, 0.25, 0.5, 0.75, 1.0], width - left - right))
    parts.append(x_axis(x, height - bottom, [(float(i), str(i)) for i in range(0, last + 1, every)]))
    parts.append(
        text((left + width - right) / 2, height - 4, "iteration (decisions booked)", "label", "middle")
    )
    step: list[tuple[float, float]] = []
    for point in points:
        if point.mean is None:
            continue
        if step:
            step.append((x(point.iteration), step[-1][1]))
        step.append((x(point.iteration), y(point.mean)))
    if step:
        parts.append(polyline(step, "best-line"))
    for point in points:
        if point.candidate is not None and point.candidate_mean is not None:
            parts.append(
                f'<circle class="candidate-point decision-{decision_class(point.decision)}" '
                f'cx="{f(x(point.iteration))}" cy="{f(y(point.candidate_mean))}" r="4">'
                + title(
                    f"iteration {point.iteration}: {point.candidate} {point.decision}, val mean "
                    f"{num(point.candidate_mean)}"
                )
                + "</circle>"
            )
        if point.mean is None:
            continue
        cx = x(point.iteration)
        if point.ci is not None:
            parts.append(line(cx, y(point.ci[0]), cx, y(point.ci[1]), "ci"))
        parts.append(
            f'<circle class="best-point" cx="{f(cx)}" cy="{f(y(point.mean))}" r="5">'
            + title(
                f"iteration {point.iteration}: best {point.best}, val mean {num(point.mean)}, "
                f"95% CI {interval(point.ci, '.3f')}"
            )
            + "</circle>"
        )
    if not step:
        parts.append(text(width / 2, height / 2, "no val rollouts of the best yet", "empty", "middle"))
    parts.append("</svg>")
    return "".join(parts)


CELL_H = 14.0


def heatmap_parts(dash: Dashboard) -> Iterator[str]:
    """Tasks (rows) × candidates (columns), a cell at a time: a page of 10,000 tasks is never
    held whole (:func:`.page.render_parts`). A cell with no reward is hatched, never a 0."""
    n_tags = max(1, len(dash.tags))
    cell_w = max(22.0, min(64.0, 640.0 / n_tags))
    left = 12.0 + 7.0 * min(24, max((len(t) for t in dash.task_ids), default=4))
    top = 12.0 + 6.0 * min(28, max((len(t) for t in dash.tags), default=4))
    legend_h = 44.0
    width = left + cell_w * n_tags + 16
    height = top + CELL_H * len(dash.task_ids) + legend_h
    yield svg_open(max(width, 460.0), height, "plot heatmap", "tasks by candidates heatmap")
    yield (
        "<defs>"
        '<pattern id="hatch-missing" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f4f4f4"/>'
        '<line x1="0" y1="0" x2="0" y2="6" stroke="#9a9a9a" stroke-width="2"/></pattern>'
        '<pattern id="hatch-infra" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(-45)"><rect width="6" height="6" fill="#efe6f7"/>'
        '<line x1="0" y1="0" x2="0" y2="6" stroke="#7b3fa6" stroke-width="2"/></pattern>'
        "</defs>"
    )
    for col, tag in enumerate(dash.tags):
        cx = left + cell_w * col + cell_w / 2
        yield text(cx, top - 6, tag, "col-label", "start", rotate=-40)
    for row, task_id in enumerate(dash.task_ids):
        yield text(left - 6, top + CELL_H * row + CELL_H - 3, task_id, "row-label", "end")
    # what repeats from cell to cell is drawn once: a column's x, the size, a mean's colour
    xs = {tag: f(left + cell_w * col) for col, tag in enumerate(dash.tags)}
    size = f'width="{f(cell_w - 1)}" height="{f(CELL_H - 1)}"'
    colours: dict[float, str] = {}
    for cells in dash.rows_of_cells():
        for cell in cells:
            state = cell.state
            if state == "scored":
                mean = cell.mean or 0.0
                fill = colours.get(mean) or colours.setdefault(mean, reward_colour(mean))
                tip = f"mean reward {cell.mean:.3f} over {cell.valid} valid trial(s)"
            elif state == "infra":
                fill, tip = "url(#hatch-infra)", f"infra errors only ({cell.infra}): missing data, not 0"
            else:
                fill, tip = "url(#hatch-missing)", "not evaluated: missing, not 0"
            if cell.infra and state == "scored":
                tip += f"; {cell.infra} infra error(s) left out"
            yield (
                f'<a href="#task-{cell.task}"><rect class="cell {state}" x="{xs[cell.tag]}" '
                f'y="{f(top + CELL_H * cell.task)}" {size} fill="{fill}">'
                + title(f"task {dash.task_ids[cell.task]} · {cell.tag}: {tip}")
                + "</rect></a>"
            )
    ly = top + CELL_H * len(dash.task_ids) + 14
    parts = [
        f'<rect class="legend-swatch" x="{f(left + 14 * i)}" y="{f(ly)}" width="14" height="12" '
        f'fill="{reward_colour(i / 10)}"/>'
        for i in range(11)
    ]
    parts.append(text(left, ly + 26, "0", "tick", "start"))
    parts.append(text(left + 154, ly + 26, "1  mean reward", "tick", "start"))
    for dx, hatch, label in ((250, "missing", "not evaluated"), (370, "infra", "infra errors only")):
        rect = f'<rect x="{f(left + dx)}" y="{f(ly)}" width="14" height="12" fill="url(#hatch-{hatch})"/>'
        parts += [rect, text(left + dx + 20, ly + 10, label, "tick")]
    if not dash.tags:
        parts.append(text(left, top, "no val rollouts yet", "empty"))
    parts.append("</svg>")
    yield "".join(parts)


ROW_H = 26.0


def forest_plot(rows: list[VerdictRow], null_band: float | None) -> str:
    """Each verdict's Δ̄ with its 95% CI against the tag it was gated against; the shaded band
    is ± the null controls' largest |Δ̄| (the gate's floor: no accept inside it)."""
    width, label_w, right_w, top, bottom = 900.0, 200.0, 260.0, 20.0, 34.0
    height = top + ROW_H * max(1, len(rows)) + bottom
    values = [0.0]
    for row in rows:
        values += [v for v in (row.delta_mean, row.bar) if v is not None]
        if row.ci is not None:
            values += list(row.ci)
    if null_band is not None:
        values += [-null_band, null_band]
    span = max(0.05, max(abs(v) for v in values)) * 1.1
    x = Scale(-span, span, label_w, width - right_w)
    bottom_y = top + ROW_H * max(1, len(rows))
    parts = [svg_open(width, height, "plot forest", "forest plot of verdicts")]
    if null_band is not None:
        parts.append(
            f'<rect class="null-band" x="{f(x(-null_band))}" y="{f(top - 6)}" '
            f'width="{f(x(null_band) - x(-null_band))}" height="{f(bottom_y - top + 6)}">'
            + title(f"null controls' band: ±{null_band:.4f} (largest |Δ̄| of a byte-identical copy)")
            + "</rect>"
        )
    ticks = nice_ticks(-span, span, 6)
    parts.append(x_axis(x, bottom_y, [(t, f"{t:+.2f}") for t in ticks]))
    parts.append(line(x(0), top - 6, x(0), bottom_y, "zero"))
    parts.append(
        text((x.start + x.end) / 2, height - 2, "Δ̄ vs the tag gated against (val)", "label", "middle")
    )
    for i, row in enumerate(rows):
        cy = top + ROW_H * i + ROW_H / 2
        kind = "null" if row.null_control else "candidate"
        parts.append(f'<g class="forest-row {kind} decision-{decision_class(row.decision)}">')
        parts.append(title(f"{row.tag} vs {row.against}: {shout(row.decision)} — {row.reason}"))
        label = f"{row.tag}{' (null)' if row.null_control else ''}"
        parts.append(text(8, cy + 4, label, "row-label", "start"))
        parts.append(
            text(label_w - 8, cy + 4, shout(row.decision), f"decision {decision_class(row.decision)}", "end")
        )
        if row.delta_mean is None:
            parts.append(
                text(width - right_w + 10, cy + 4, f"decided before any rollout ({row.basis})", "empty")
            )
        else:
            if row.ci is not None:
                parts.append(line(x(row.ci[0]), cy, x(row.ci[1]), cy, "ci"))
            if row.bar is not None:
                parts.append(line(x(row.bar), cy - 7, x(row.bar), cy + 7, "bar"))
            parts.append(f'<circle class="delta" cx="{f(x(row.delta_mean))}" cy="{f(cy)}" r="5"/>')
            summary = f"{row.delta_mean:+.4f} {interval(row.ci)} p={num(row.p_value, '.3g')} n={row.n_tasks}"
            parts.append(text(width - right_w + 10, cy + 4, summary, "numbers"))
        parts.append("</g>")
    if not rows:
        parts.append(
            text(
                width / 2, top + ROW_H / 2, "no verdicts yet (gate with --capevolve-gate)", "empty", "middle"
            )
        )
    parts.append("</svg>")
    return "".join(parts)
