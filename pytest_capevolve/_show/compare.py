"""``capevolve compare``'s answer for people: the table on the terminal (:func:`render_table`)
and the Markdown summary a CI job posts (:func:`render_markdown`). Both say, after the
numbers, what holds for imported results and what does not."""

from __future__ import annotations

from typing import Any

from .._imported.compare import Comparison, PairResult
from .numbers import interval, num
from .report import render_verdicts

MARKDOWN_TASKS = 50  # per-task rows shown per pair in the Markdown (the changed ones first)


def _run_line(role: str, result_run: Any) -> str:
    notes = f"; {'; '.join(result_run.notes)}" if result_run.notes else ""
    first = next((o.error for o in result_run.outcomes if o.reward is None and o.error), None)
    cause = f" (the first: {_cut(first)})" if first else ""
    return (
        f"{role} {_named(result_run)}: {result_run.source}, {len(result_run.task_ids)} tasks, "
        f"{len(result_run.outcomes)} outcomes, {result_run.infra_errors} errored{cause}{notes}"
    )


def _named(run: Any) -> str:
    """A run's label, with its file where ``--label`` gave it another name: who reads the table or
    the posted summary sees which file was the baseline, whatever the runs were called."""
    named_by_file = run.path.name in run.label or run.label == run.path.stem
    return run.label if named_by_file else f"{run.label} ({run.path})"


def _cut(text: str, limit: int = 160) -> str:
    """One line of an error, short enough to sit in a run's line."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def render_table(comparison: Comparison) -> list[str]:
    """The terminal form: the runs, one verdict line each, the band moves, the promises."""
    question = f"question: is each run {comparison.settings.question}?"
    lines = [_run_line("baseline", comparison.baseline), question]
    lines += [_run_line("candidate", p.candidate) for p in comparison.pairs]
    lines += ["", *render_verdicts([p.verdict for p in comparison.pairs]), ""]
    lines += [f"{result.candidate.label}: {_facts(result)}" for result in comparison.pairs]
    return [*lines, "", *_promise_lines(comparison.promises(), "What holds for imported results")]


def _promise_lines(promised: dict[str, list[str]], heading: str, *, markdown: bool = False) -> list[str]:
    """What holds and what does not, for the terminal or (``markdown``) a CI summary."""
    if markdown:
        holds = [f"### {heading}", "", *[f"- {_md(line)}" for line in promised["hold"]], ""]
        return [*holds, "### What does not", "", *[f"- {_md(line)}" for line in promised["do_not_hold"]]]
    holds = [f"{heading.lower()}:", *[f"  + {line}" for line in promised["hold"]]]
    return [*holds, "what does not:", *[f"  - {line}" for line in promised["do_not_hold"]]]


def _facts(result: PairResult) -> str:
    verdict, pairing = result.verdict, result.pairing
    moves = ", ".join(f"{k} {v}" for k, v in result.band_moves.items()) or "none"
    coverage = verdict.coverage.get("paired")
    facts = [
        f"paired coverage {num(coverage, '.0%')} of {len(pairing.task_ids)} tasks",
        f"α {float(result.level):.4g}",
        f"regressions {len(verdict.regressions)}",
        f"band moves: {moves}",
    ]
    if verdict.margin:  # the margin's bounds: where the test would turn
        lower, upper = verdict.margin["lower"], verdict.margin["upper"]
        shown = f"[{lower:+.4f}, {upper:+.4f}]" if upper is not None else f"> {lower:+.4f}"
        facts.insert(1, f"{verdict.margin['question']}: mean Δ {shown} at {1 - float(result.level):.0%}")
    only = (len(pairing.only_in_baseline), len(pairing.only_in_candidate))
    if any(only):
        facts.append(f"tasks in one run only: {only[0]} baseline, {only[1]} candidate")
    # an errored trial (the tool logged an error), and apart from it one the other run measured
    # that this file has no row for: both are missing data, weighed alike
    errors, lacking = verdict.infra_errors, pairing.lacking
    errored = {side: errors.get(side, 0) - lacking.get(side, 0) for side in ("best", "candidate")}
    if any(errored.values()):
        facts.append(f"errored: {errored['best']} baseline, {errored['candidate']} candidate")
    if any(lacking.values()):
        lacks = f"{lacking.get('best', 0)} baseline, {lacking.get('candidate', 0)} candidate"
        facts.append(f"missing (no row in one file): {lacks}")
    return "; ".join(facts)


def render_markdown(comparison: Comparison) -> str:
    """The summary a CI job posts on a pull request (each pair's changed tasks folded)."""
    base, settings = comparison.baseline, comparison.settings
    holm = " (Holm across runs)" if settings.multiple == "holm" and len(comparison.pairs) > 1 else ""
    out = [
        "## capevolve compare",
        "",
        f"Baseline **{_md(_named(base))}** ({base.source}, {len(base.task_ids)} tasks). "
        f"{_test_words(comparison)} at α = {settings.alpha:g}{holm}.",
        "",
        "| run | decision | n | Δ̄ | 95% CI | p | α | coverage | regressions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for result in comparison.pairs:
        v = result.verdict
        out.append(
            f"| {_md(_named(result.candidate))} | **{v.decision.upper()}** | {v.n_tasks} | "
            f"{num(v.delta_mean, '+.4f')} | {interval(v.ci)} | {num(v.p_value, '.4g')}"
            f"{' MC' if v.p_method == 'monte_carlo' else ''} | "
            f"{float(result.level):.4g} | {num(v.coverage.get('paired'), '.0%')} | {len(v.regressions)} |"
        )
    out.append("")
    for result in comparison.pairs:
        out += _pair_section(result)
    out += _promise_lines(comparison.promises(), "What holds for imported results", markdown=True)
    return "\n".join(out) + "\n"


def _test_words(comparison: Comparison) -> str:
    settings = comparison.settings
    if settings.margin or settings.equivalence:
        return (
            f"Each run asked whether it is {_md(settings.question)}: a betting test valid for any "
            "rewards in [0, 1] (p = 1/E; the bound is where it would turn)"
        )
    return (
        "Each run against it: the gate's one-sided paired sign-flip test (exact on a reward grid; "
        "p marked MC is seeded Monte Carlo)"
    )


def _pair_section(result: PairResult) -> list[str]:
    v = result.verdict
    changed = [t for t in result.tasks if t["delta"] not in (0, 0.0)]
    changed.sort(key=lambda t: (t["delta"] is None, t["delta"] or 0.0))
    lines = [
        f"<details><summary>{_md(result.candidate.label)}: {_md(v.reason)}</summary>",
        "",
        f"Band moves: {', '.join(f'{k} {n}' for k, n in result.band_moves.items()) or 'none'}.",
        "",
        "| task | baseline | candidate | Δ | bands |",
        "|---|---|---|---|---|",
    ]
    for task in changed[:MARKDOWN_TASKS]:
        lines.append(
            f"| {_md(task['task_id'])} | {num(task['baseline'])} ({task['baseline_passes']}) | "
            f"{num(task['candidate'])} ({task['candidate_passes']}) | {num(task['delta'], '+.3f')} | "
            f"{task['baseline_band']} → {task['candidate_band']} |"
        )
    if len(changed) > MARKDOWN_TASKS:
        lines.append(f"| … {len(changed) - MARKDOWN_TASKS} more changed tasks in the JSON | | | | |")
    if not changed:
        lines.append("| (no task changed) | | | | |")
    return [*lines, "", "</details>", ""]


def _md(text: str) -> str:
    """Text safe in a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")
