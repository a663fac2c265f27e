"""What a hill-climb iteration tells its optimizer: the focus, the plateau signal and the prompt.

The focus schedules and the convergence signal are pure functions of the parent's per-task rows
and the iteration number."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from string import Template

from .._project.spec import HILL_CLIMB_FOCUS
from .diagnose import DEFECT, MISSING, SOLID, UNSTABLE, TaskBand

# The plateau signal from ``stall`` (rejects in a row against the same best): each level asks
# the next proposal for a different kind of edit; ``stop`` ends the loop under --convergence.
CONVERGENCE_LEVELS = (("ok", 0), ("warn", 2), ("paradigm_shift", 3), ("stop", 5))
CONVERGENCE_ADVICE = {
    "ok": "No plateau: keep making small, targeted edits.",
    "warn": "Two rejects in a row: the last edits did not move val. Re-read the rejected "
    "memory and make sure the next edit differs in kind, not just in wording.",
    "paradigm_shift": "A plateau: several rejects in a row. Stop polishing the same kind of "
    "edit; change approach (a new rule, a tool, a restructured skill), or remove something.",
    "stop": "A long plateau: the loop stops here under --convergence.",
}


def convergence(stall: int) -> str:
    """The graded plateau signal: stall 0–1 ``ok``, 2 ``warn``, 3–4 ``paradigm_shift``,
    ≥ 5 ``stop`` (``stall`` counts rejects in a row; an accept resets it)."""
    return next((name for name, threshold in reversed(CONVERGENCE_LEVELS) if stall >= threshold), "ok")


def focus_tasks(rows: Sequence[TaskBand], mode: str, iteration: int) -> list[str]:
    """The task ids iteration ``iteration`` (1-based) asks the optimizer to fix: ``all`` failing
    val tasks in val order; ``cyclic``, one, round-robin in val order; ``hardest-first``, one,
    by the parent's mean reward (ties by id), then cycling. Empty when nothing fails."""
    if mode not in HILL_CLIMB_FOCUS:
        raise ValueError(f"focus {mode!r}: use one of {', '.join(HILL_CLIMB_FOCUS)}")
    bad = [r for r in rows if r["band"] in (DEFECT, UNSTABLE)]  # always failing, or flaky
    if not bad:
        return []
    if mode == "all":
        return [r["task_id"] for r in bad]
    if mode == "hardest-first":
        bad = sorted(
            bad, key=lambda r: (r["mean_reward"] if r["mean_reward"] is not None else 0.0, r["task_id"])
        )
    return [bad[(iteration - 1) % len(bad)]["task_id"]]


DEFAULT_INSTRUCTIONS = """\
# Hill-climb iteration $iteration ($cid)

You are improving an AI agent's capability. Edit the files in the work folder
`$workdir` (a copy of the current best, `$parent`) so that more val tasks pass.
Every edit you leave there is evaluated on val and gated against `$parent`; a change
that does not clear the gate is rejected and recorded.

## Rules

- Edit only the capability files in the work folder. Changing a protected file (the scorer,
  the adapter, tasks, gold answers) makes the candidate indecisive: never scored.
- `LEDGER.md`, `rejected.jsonl`, `MECHANISMS.md`, `RUNMAP.md` and `prior_iterations/` are
  read-only context. Append what you tried and why to `JOURNAL.md` (`## Iteration $cid`).
- Make one coherent change. Do not repeat a rejected edit (see `rejected.jsonl`).

## Edit surface

$capabilities

## Plateau signal: $convergence

$convergence_advice

## Focus ($focus_mode)

$focus

## Failure index (parent `$parent` on $split)

$failure_index

## Protect these passing ids

These $split tasks pass every trial with the parent; an edit that breaks them is a regression:

$protect
"""


@dataclass(frozen=True)
class PromptInputs:
    """Everything one iteration's prompt says (see :func:`render_prompt`)."""

    iteration: int
    cid: str
    parent: str
    workdir: str
    rows: Sequence[TaskBand]
    examples: dict[str, dict[str, str]]  # task id → {"feedback": ..., "rollout": path}
    focus_mode: str
    focus: Sequence[str]
    stall: int
    capabilities: Sequence[str] = ()
    split: str = "val"  # the optimizer's signal (hill-climb --signal): the split of ``rows``


def render_prompt(inputs: PromptInputs, template: str = DEFAULT_INSTRUCTIONS) -> str:
    """The prompt file: ``template`` (:class:`string.Template`) filled with the failure index,
    the focus, the plateau signal, the edit surface and the ids to protect."""
    rows = list(inputs.rows)
    sections = []
    for title, keep in (
        ("Always failing (0/n)", lambda r: r["band"] == DEFECT),
        ("Flaky (0 < k < n)", lambda r: r["band"] == UNSTABLE),
        ("Infra-errored (missing data, not failures)", lambda r: r["band"] == MISSING or r["infra_errors"]),
    ):
        chosen = [r for r in rows if keep(r)]
        sections.append(f"### {title}: {len(chosen)}\n")
        if chosen:
            sections.append("| task | k/n | feedback | failing rollout |\n|---|---|---|---|")
            for r in chosen:
                example = inputs.examples.get(r["task_id"], {})
                feedback = str(example.get("feedback", "")).replace("|", "\\|").replace("\n", " ")
                rollout = example.get("rollout", "")
                sections.append(f"| {r['task_id']} | {r['passes']}/{r['trials']} | {feedback} | {rollout} |")
        sections.append("")
    solid = [r["task_id"] for r in rows if r["band"] == SOLID]
    if inputs.focus:
        focus = f"Fix these {inputs.split} tasks first: " + ", ".join(inputs.focus)
    else:
        focus = f"No {inputs.split} task fails: there is nothing left to fix on {inputs.split}."
    if inputs.capabilities:
        surface = "You may edit only: " + ", ".join(f"`{c}`" for c in inputs.capabilities)
    else:
        surface = "No edit surface was named (--capabilities): any capability file may change."
    level = convergence(inputs.stall)
    return Template(template).safe_substitute(
        iteration=inputs.iteration,
        cid=inputs.cid,
        parent=inputs.parent,
        workdir=inputs.workdir,
        capabilities=surface,
        convergence=f"{level} (stall {inputs.stall})",
        convergence_advice=CONVERGENCE_ADVICE[level],
        focus_mode=inputs.focus_mode,
        focus=focus,
        failure_index="\n".join(sections).rstrip() + "\n",
        protect=("- " + " ".join(solid)) if solid else "- (none yet)",
        split=inputs.split,
    )
