"""The two handover files that explain the loop to its proposer: ``PROCESS.md`` (how a round
goes, its rules) and ``RUNMAP.md`` (where things are in the run dir). Pure text from the spec
and the run's ids; no test task or score."""

from __future__ import annotations

import shlex
from pathlib import Path

from .._decide.alpha_budget import LOOP_SCHEDULE
from .._project.candidate import HANDOVER
from .._project.spec import Spec
from .._project.way_on import commit_command
from .hill_climb_options import names_a_schedule

AGENT, HILL_CLIMB = "agent", "hill-climb"


def _ceilings(spec: Spec) -> str:
    named = [
        f"{name} {value:g}" if isinstance(value, float) else f"{name} {value}"
        for name, value in (
            ("max_usd", spec.max_usd),
            ("max_metric_calls", spec.max_metric_calls),
            ("max_iterations", spec.max_iterations),
            ("stall", spec.stall),
        )
        if value is not None
    ]
    stop = f"; stop condition `{spec.stop_condition}`" if spec.stop_condition else ""
    return (", ".join(named) or "none set") + stop


def render_process(
    spec: Spec, run_id: str, workdir: Path, tag: str, parent: str, loop: str, schedule: str = LOOP_SCHEDULE
) -> str:
    """``PROCESS.md``: one round of this loop, what the candidate is, what is shown, the rules."""
    handover = ", ".join(f"`{n}`" for n in sorted(HANDOVER))
    schedule = str(spec.gate_alpha_schedule) if names_a_schedule(spec.path) else schedule  # else the run's
    if loop == HILL_CLIMB:
        round_steps = [
            f"1. `capevolve hill-climb` made this work copy of the best, `{parent}`, wrote the prompt and"
            " these files, and ran you (the optimizer command) on it.",
            "2. When you exit, the handover files are removed and what is left is the candidate. A crash,"
            " a timeout or a non-zero exit leaves an unchanged copy of the parent: a wasted round.",
            "3. A gate session evaluates it on val and gates it against its parent; the decision is booked"
            " (accept moves the best; anything else leaves it) and the candidate is recorded in the store.",
            "4. The next round starts from the best, and reads what you wrote in `JOURNAL.md`.",
        ]
        cost = (
            'Report what you cost: print one JSON line on stdout, `{"cost_usd": 0.12, "tokens": 3456}`'
            " (the largest such line counts: a running total, printed again at the end, is counted"
            " once). It is booked with this round's decision and `max_usd` counts it beside the"
            " rollouts from the moment you exit: a cost that leaves no room for this round's gate"
            " ends the loop unjudged. A negative, NaN or absurd value is refused."
        )
    else:
        # this run's, by the project's absolute path: the agent reads this in its work copy, and a newer
        # run of the project may have begun by the time it books
        book = commit_command(tag, "accept|reject", spec.project_dir, run_id, absolute=True)
        round_steps = [
            f"1. `capevolve work new {tag}` made this work copy of `{parent}` and wrote these files.",
            "2. Edit it, then gate it: `capevolve pytest --capevolve-run "
            f"{shlex.quote(str(spec.project_dir.absolute()))} --capevolve-run-id {run_id} "
            f"--capevolve-candidate {workdir} --capevolve-gate --capevolve-commit none`"
            " (siblings are gated together, with null controls; `--capevolve-commit none` leaves the"
            " booking to step 3, which carries your cost).",
            f"3. Book the decision: `{book} ...`; an accept needs the gate's accept against the current"
            " best.",
            "4. The next work copy starts from the best, and reads what you wrote in `JOURNAL.md`.",
        ]
        cost = (
            f"Report what you cost when you book: `{book} ... --optimizer-usd X --optimizer-tokens N`;"
            " `max_usd` counts it beside the rollouts."
        )
    return "\n".join(
        [
            f"# How this loop works (run {run_id}, {loop} loop)",
            "",
            "## One round",
            "",
            *round_steps,
            "",
            "## The rules you play by",
            "",
            f"- The candidate is its bytes: every file of this folder but the handover files ({handover}) at"
            " its top level. Your journal never changes what is evaluated.",
            "- Bytes the run already holds — a refuted edit proposed again, an unchanged copy — are booked"
            " `reject (repeat)` without a rollout. Read `rejected.jsonl` and `prior_iterations/` and make"
            " the next edit differ in kind.",
            "- Only val is shown to you. The test split is sealed: scored once, by finalize, for the"
            " chosen best; nothing of it is in these files, and a candidate that holds a val or test"
            " task's id or gold answer is refused (indecisive, never scored).",
            "- The harness is locked with the run (adapter, scorer, spec, microcases, conftest.py):"
            " changing or adding one makes the candidate indecisive, never scored.",
            f"- The gate: mode `{spec.gate_mode}`, α {spec.gate_alpha:g} spent across the run's decisions"
            f" by the `{schedule}` schedule, on {spec.num_trials} trial(s) per"
            " val task with common seeds; null controls (byte-identical copies of the best) set the noise"
            " floor. Make one coherent change a gate can see.",
            f"- Ceilings: {_ceilings(spec)}. The loop stops at a ceiling.",
            f"- {cost}",
            "- Append what you tried, why, and what you expect to `JOURNAL.md`, below its marker, as"
            f" `## Iteration {tag}`. The next round reads it with this round's verdict.",
            "",
        ]
    )


def render_runmap(run_id: str, root: str, workdir: Path, tag: str, parent: str, prompt: str | None) -> str:
    """``RUNMAP.md``: a table of where things are (``root``: the run dir as the project names it)."""
    rows = [
        (f"`{workdir}`", f"this work copy of `{parent}`: edit it; it becomes candidate `{tag}`"),
        ("`JOURNAL.md` (here)", "earlier rounds' notes with their verdicts; append yours below the marker"),
        ("`PROCESS.md` (here)", "how the loop works and the rules you play by"),
        ("`LEDGER.md` (here)", f"one row per decision (a copy of `{root}/LEDGER.md`)"),
        ("`rejected.jsonl` (here)", "what was refuted: parent, files, the diff, val tasks fixed and broke"),
        ("`MECHANISMS.md` (here)", "causes the per-task sub-agents found, deduplicated (mechanism add)"),
        ("`prior_iterations/<tag>/` (here)", "per earlier round: `diff.patch`, `verdict.txt`, `JOURNAL.md`"),
        (
            f"`{root}/rollouts/val/<task>__<name>.json`",
            "val rollouts: input, output, feedback, and the tag and trial each is of (`<name>` comes from "
            "the run's secret: `capevolve diagnose TAG` lists a tag's files task by task)",
        ),
        (f"`{root}/verdicts/<tag>.json`", "every number a verdict rests on"),
        (
            f"`{root}/candidates/<tag>/candidate.json`",
            "each evaluated candidate's content hash and files (its read-only snapshot, in `snapshots/` "
            "under a name that does not say its tag: `capevolve work new NEW --from TAG` copies it)",
        ),
        (f"`{root}/hill_climb/<tag>/`", "per hill-climb round: prompt, optimizer output, diff, log, outcome"),
        (f"`{root}/state.json`", "best, iterations, stall, what was spent"),
        (f"`{root}/events.jsonl`", "the record: every event, hash-chained (read it; never edit it)"),
    ]
    if prompt:
        rows.insert(1, (f"`{prompt}`", "this round's prompt: the parent's failures, focus, ids to protect"))
    lines = [f"# Where things are (run {run_id})", "", "| path | what it is for |", "|---|---|"]
    lines += [f"| {path} | {use} |" for path, use in rows]
    lines += [
        "",
        "The files marked (here) are handover files: context, never part of the candidate. The test",
        "split is sealed and not shown. The others are the run dir's, which a confined optimizer cannot",
        "open: inside `capevolve agent`, read them through its commands — `capevolve diagnose TAG --table`",
        "(rollouts: input, output, feedback), `capevolve gate TAG` (a verdict's numbers), `capevolve spend",
        "--table` (best, spend, ceilings), `capevolve diff TAG`; a hill-climb's optimizer has its round's",
        "prompt and the files marked (here).",
        "",
    ]
    return "\n".join(lines)
