"""``dashboard.html``: one self-contained page — no network, no fonts, no library — that draws a run.

Pure: :func:`render_parts` turns a :class:`.model.Dashboard` into HTML. Untrusted text (task ids,
feedback, model output, reasons) is escaped everywhere it appears. A Content-Security-Policy
allows nothing but this page's own style and its one tiny script (pinned by hash), so even
text that got past the escaping could not load or run anything. The script carries no data: it
opens a task's drill-down when a heatmap cell links to it."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Iterator

from ..numbers import interval, num
from .model import DETAIL_LIMIT, Dashboard, Trial
from .plots import best_so_far_plot, esc, forest_plot, heatmap_parts, shout

OUTPUT_CHARS = 240  # model output is shown cut: the rollout file holds all of it
PLAIN_ROWS = 1024  # drill-down rows without detail kept drawn (a few shapes each; bounded all the same)

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d1d1f;
max-width:1280px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd}
p.caption{color:#555;font-size:13px;margin:2px 0 8px;max-width:900px}
table{border-collapse:collapse;font-size:12px;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.labels li{color:#7a4b00;font-size:13px}
svg{font-size:11px;display:block;margin:6px 0;overflow:visible}
svg text{fill:#333}svg .tick{fill:#666}svg .label{fill:#333;font-weight:600}
svg .empty{fill:#888;font-style:italic}
.grid{stroke:#eee}.axis{stroke:#999}.zero{stroke:#555;stroke-dasharray:3 3}
.best-line{fill:none;stroke:#1f5fa8;stroke-width:2}.best-point{fill:#1f5fa8}
.ci{stroke:#1f5fa8;stroke-width:2;opacity:.6}
.candidate-point{stroke:#fff;stroke-width:1}
.decision-accept{fill:#1a9850;color:#1a9850}.decision-reject{fill:#d73027;color:#d73027}
.decision-indecisive,.decision-inconclusive,.decision-provisional{fill:#e08a00}
circle.decision-seed{fill:#1f5fa8}
.cell{stroke:#fff;stroke-width:.5}.cell:hover{stroke:#000;stroke-width:1.5}
.null-band{fill:#9aa7b8;opacity:.28}.bar{stroke:#000;stroke-width:2}
.forest-row .delta{fill:#333}.forest-row.decision-accept .delta{fill:#1a9850}
.forest-row.decision-reject .delta{fill:#d73027}.forest-row.null .delta{fill:#7d8a9c}
.forest-row .ci{stroke:#555}text.decision{font-weight:600}
text.decision.accept{fill:#1a9850}text.decision.reject{fill:#d73027}
details{border:1px solid #e3e3e3;margin:3px 0;padding:2px 8px}
details[open]{background:#fafafa}summary{cursor:pointer;font-size:13px}
td.feedback,td.output{white-space:pre-wrap;word-break:break-word;max-width:520px}
.infra{color:#7b3fa6}
"""

# Opens a task's <details> when the URL's #fragment names it (a heatmap cell was clicked).
SCRIPT = (
    "function openTarget(){var id=location.hash.slice(1);"
    "var el=id?document.getElementById(id):null;"
    'if(el&&el.tagName==="DETAILS"){el.open=true;el.scrollIntoView();}}'
    'window.addEventListener("hashchange",openTarget);openTarget();'
)


def _sha256(source: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")


CSP = (
    f"default-src 'none'; style-src '{_sha256(STYLE)}'; script-src '{_sha256(SCRIPT)}'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)


def render_parts(dash: Dashboard) -> Iterator[str]:
    """The page in pieces, in order, each drawn when it is asked for: the heatmap a cell and
    the drill-down a task at a time, so a page of 10,000 tasks (14 MB) is written to its file
    without ever being held whole (:meth:`~...store.rundir.RunDir.write_dashboard`)."""
    yield (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>capevolve — run {esc(dash.run_id)}</title>"
        f"<style>{STYLE}</style></head><body>\n"
    )
    yield _header(dash) + "\n"
    yield from _section(
        "Best so far on val",
        "The best's val mean after each booked decision, with its 95% t interval over tasks "
        "(an accept moves the best). Dots: each decided candidate's own val mean, coloured by "
        "its decision (green accept, red reject, amber other).",
        [best_so_far_plot(dash.best_so_far)],
    )
    yield from _section(
        "Verdicts",
        "Each verdict's mean paired delta Δ̄ with its 95% CI, against the tag it was gated "
        "against; the black tick is the bar it had to clear. The grey band is ± the null "
        "controls' largest |Δ̄| — what a byte-identical copy moves by chance; no accept lies inside it.",
        [forest_plot(dash.verdicts, dash.null_band) + _verdict_table(dash)],
    )
    yield from _section(
        "Tasks × candidates (val)",
        "Each cell is a task's mean reward over its valid trials. Hatched grey: not "
        "evaluated; hatched purple: infra errors only — missing data, never a 0. Click a cell "
        "for the task's trials and the scorer's feedback.",
        heatmap_parts(dash),
    )
    yield from _section(
        "Per-task drill-down (val)",
        f"Every val rollout by task with its reward; feedback and output for the first "
        f"{DETAIL_LIMIT} that scored below 1 (each rollout's file in rollouts/val/ holds all of it).",
        _drill_down(dash),
    )
    yield f"<script>{SCRIPT}</script>\n</body></html>\n"


def _section(heading: str, caption: str, body: Iterable[str]) -> Iterator[str]:
    yield f'<section><h2>{esc(heading)}</h2><p class="caption">{esc(caption)}</p>'
    yield from body
    yield "</section>\n"


def _header(dash: Dashboard) -> str:
    out = [
        f"<header><h1>capevolve — run {esc(dash.run_id)}</h1>",
        f"<p>best <b>{esc(dash.best)}</b>{f' ({esc(dash.best_label)})' if dash.best_label else ''} · "
        f"{len(dash.task_ids)} val tasks × {dash.num_trials} trials · "
        f"{len(dash.tags)} tag(s) evaluated on val · {len(dash.verdicts)} verdict(s) · "
        f"{len(dash.decisions)} decision(s)</p>",
    ]
    if dash.grown_trials:
        grown = ", ".join(f"{tag} {n}" for tag, n in dash.grown_trials.items())
        out.append(
            f'<p class="grown">grown: {esc(grown)} trials per task. The heatmap, the curve and the '
            f"table pool the first {dash.num_trials} trials of every tag; a grown verdict (forest "
            "plot) pools every trial both of its arms have</p>"
        )
    if dash.labels:
        out.append(
            '<ul class="labels">' + "".join(f"<li>{esc(label)}</li>" for label in dash.labels) + "</ul>"
        )
    out += [f'<p class="delta">{esc(line)}</p>' for line in dash.deltas]  # paired best − seed: val, test
    if dash.table:
        header, *body = dash.table
        out.append('<table class="measure"><tr>' + "".join(f"<th>{esc(c)}</th>" for c in header) + "</tr>")
        out += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in body]
        out.append("</table>")
    out.append("</header>")
    return "".join(out)


def _verdict_table(dash: Dashboard) -> str:
    if not dash.verdicts:
        return ""
    head = ("tag", "against", "decision", "basis", "n", "Δ̄", "95% CI", "p", "bar", "reason")
    out = ['<table class="verdicts"><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>"]
    for v in dash.verdicts:
        named = [v.tag + (" (null)" if v.null_control else ""), v.against, shout(v.decision), v.basis]
        nums = [num(v.delta_mean, "+.4f"), interval(v.ci, "+.4f"), num(v.p_value, ".4g"), num(v.bar, ".4f")]
        cells = [*(("", c) for c in named), *(("num", c) for c in [str(v.n_tasks), *nums]), ("", v.reason)]
        out.append("<tr>" + "".join(f'<td class="{k}">{esc(c)}</td>' for k, c in cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _trial_row(trial: Trial) -> str:
    if trial.infra_error:
        reward = '<td class="num infra">INFRA</td>'
        feedback = f'<td class="feedback infra">{esc(trial.infra_error)}</td>'
    else:
        reward = f'<td class="num">{esc(num(trial.reward))}</td>'
        feedback = f'<td class="feedback">{esc(trial.feedback) if trial.detail else "·"}</td>'
    output = trial.output if len(trial.output) <= OUTPUT_CHARS else trial.output[:OUTPUT_CHARS] + "…"
    return (
        f'<tr><td>{esc(trial.tag)}</td><td class="num">{trial.trial}</td>{reward}{feedback}'
        f'<td class="output">{esc(output)}</td></tr>'
    )


def _drill_down(dash: Dashboard) -> Iterator[str]:
    """A task at a time: its means per tag, then its val rollouts in column, then trial order,
    without a :class:`.model.Trial` per rollout: a row with no detail has only a few shapes, each
    drawn once."""
    if not dash.task_ids:
        yield "<p>no val tasks yet</p>"
        return
    plain: dict[tuple[str, int, str | None, str], str] = {}
    arms = [(tag, dash.val.get(tag, {}), range(dash.trial_counts.get(tag, 0))) for tag in dash.tags]
    for (row, task_id), cells in zip(enumerate(dash.task_ids), dash.rows_of_cells(), strict=True):
        means = [f"{cell.tag} {num(cell.mean, '.2f')}" for cell in cells]
        summary = f"task {task_id} — " + ", ".join(means) if means else f"task {task_id}"
        rows = []
        for tag, arm, trials in arms:
            for k in trials:
                record = arm.get((task_id, k))
                if record is None:
                    continue
                detail = dash.details.get((row, tag, k))
                if detail is not None:
                    rows.append(_trial_row(detail))
                    continue
                infra = record.infra_error or None
                key = (tag, k, infra, "" if infra else num(record.reward))
                drawn = plain.get(key)
                if drawn is None:
                    drawn = _trial_row(Trial(tag, k, record.reward, record.infra_error, "", "", detail=False))
                    if len(plain) < PLAIN_ROWS:
                        plain[key] = drawn
                rows.append(drawn)
        body = (
            "<table><tr><th>tag</th><th>trial</th><th>reward</th><th>feedback</th><th>output</th></tr>"
            + "".join(rows)
            + "</table>"
            if rows
            else "<p>no val rollout of this task yet</p>"
        )
        yield f'<details class="task" id="task-{row}"><summary>{esc(summary)}</summary>{body}</details>'
