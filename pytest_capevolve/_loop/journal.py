"""The journal that reaches the next round: each work copy's ``JOURNAL.md`` opens with what every
earlier round wrote in its own, with that round's verdict.

Used when a work copy is made (:func:`.work.new_work_copy`, for the agent-driven loop and for
hill-climb) and by :mod:`.handover` for ``prior_iterations/``. A round is a decided tag, in the
order first decided (its standing decision is the last one booked): its verdict in one line, what
it wrote below the marker of its journal — hill-climb keeps it as ``hill_climb/<tag>/JOURNAL.md``
(the work copy's handover is cleared), the agent loop in ``work/<tag>/JOURNAL.md`` — and its
change as a diff against its parent. What a round carried forward from earlier rounds sits above
its marker, so it is never carried twice. Pure reads of the run dir; the text is context for a
proposer, never read by a decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._policy.refuted import compared
from .._project.candidate_diff import bounded, unified_diff
from .._store.rundir import RunDir

JOURNAL = "JOURNAL.md"
JOURNAL_MARKER = "<!-- capevolve: append '## Iteration <tag>' entries below this line -->"
# a round's entries as carried forward, and a round's diff in prior_iterations/: the head, cut
ENTRY_LIMIT = 4000
PRIOR_DIFF_LIMIT = 20000


@dataclass(frozen=True)
class Round:
    """One earlier round as the next proposer sees it."""

    tag: str
    parent: str
    verdict: str  # one line: decision, basis, Δ̄, p and the gate's reason
    entries: str  # what it wrote below its journal's marker ("" when nothing)
    diff: str  # its change against its parent, unified, bounded


def own_entries(text: str) -> str:
    """What a journal's own round wrote: the text below the last marker (all of it when the
    marker was removed), stripped and cut to :data:`ENTRY_LIMIT` characters."""
    mine = text.rsplit(JOURNAL_MARKER, 1)[-1].strip()
    if len(mine) > ENTRY_LIMIT:
        mine = mine[:ENTRY_LIMIT].rstrip() + f"\n... (cut: {len(mine) - ENTRY_LIMIT} characters left out)"
    return mine


def verdict_line(entry: dict[str, Any], reason: str) -> str:
    """``reject (gate) vs cand_0001 (Δ̄=+0.0833, p=0.25): reason`` on one line."""
    word = str(entry["decision"]) + (f" ({entry['basis']})" if entry.get("basis") else "")
    numbers = []
    if entry.get("delta_mean") is not None:
        numbers.append(f"Δ̄={round(float(entry['delta_mean']), 4) + 0.0:+.4f}")
    if entry.get("p_value") is not None:
        numbers.append(f"p={float(entry['p_value']):.4g}")
    line = f"{word} vs {entry.get('parent')}" + (f" ({', '.join(numbers)})" if numbers else "")
    reason = " ".join(reason.split())
    return f"{line}: {reason}" if reason else line


def earlier_rounds(rundir: RunDir, besides: str) -> list[Round]:
    """Every decided tag but ``besides``, in the order first decided, as a :class:`Round`."""
    standing: dict[str, dict[str, Any]] = {}
    for event in rundir.decisions():
        tag = str(event["tag"])
        if tag != besides:
            standing[tag] = event  # dicts keep the first insertion's place: the order decided
    rounds = []
    for tag, entry in standing.items():
        verdict = rundir.verdicts.verdict(tag) or {}
        rounds.append(
            Round(
                tag=tag,
                parent=str(entry.get("parent")),
                verdict=verdict_line(entry, str(verdict.get("reason") or "")),
                entries=_entries_of(rundir, tag),
                diff=_diff_of(rundir, tag, entry, verdict),
            )
        )
    return rounds


def _entries_of(rundir: RunDir, tag: str) -> str:
    for path in (rundir.hill_climb_dir(tag) / JOURNAL, rundir.work_dir(tag) / JOURNAL):
        if path.is_file():
            return own_entries(path.read_text(encoding="utf-8", errors="replace"))
    return ""


def _diff_of(rundir: RunDir, tag: str, entry: dict[str, Any], verdict: dict[str, Any]) -> str:
    """hill-climb's ``diff.patch`` (made as the optimizer finished), else the snapshots compared,
    else the diff the reject logged."""
    patch = rundir.hill_climb_dir(tag) / "diff.patch"
    if patch.is_file():
        return bounded(patch.read_text(encoding="utf-8", errors="replace"), PRIOR_DIFF_LIMIT)
    parent = str(entry.get("parent"))
    folders = compared(rundir, tag, parent, verdict)
    if folders is not None:
        try:
            return bounded(unified_diff(folders[1], folders[0], parent, tag), PRIOR_DIFF_LIMIT)
        except (OSError, ValueError):
            pass
    return str(entry.get("diff") or "")


def render_journal(tag: str, parent: str, merged_from: list[str] | None, rounds: list[Round]) -> str:
    """A new work copy's ``JOURNAL.md``: its heading, every earlier round's verdict and entries
    (read-only context), then the marker below which this round writes."""
    lines = [
        f"# Journal of {tag} (parent {parent}"
        + (f"; a merge of {', '.join(merged_from)}" if merged_from else "")
        + ")",
        "",
        "What you tried, why, and what the numbers said. This file is not part of the candidate.",
        "",
        "## Earlier rounds",
        "",
    ]
    if not rounds:
        lines += ["None yet: this is the run's first decided round.", ""]
    else:
        lines += [
            "Carried forward from each earlier round's journal, in the order decided, with its",
            "verdict; its change is `prior_iterations/<tag>/diff.patch` (what was refuted is also in",
            "`rejected.jsonl`).",
            "",
        ]
        for r in rounds:
            lines += [f"### {r.tag}: {r.verdict}", "", r.entries or "(it wrote nothing in its journal)", ""]
    lines += [JOURNAL_MARKER, ""]
    return "\n".join(lines)
