"""The journal that reaches the next round: each work copy's ``JOURNAL.md`` opens with what every
earlier round wrote in its own, with that round's verdict.

Each entry is the one frozen at the round's first decision (:mod:`.._policy.booking.journal_entry`),
never the files a later optimizer can rewrite. Context for a proposer, never read by a decision."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._policy.booking.commit import compared
from .._policy.booking.journal_entry import JOURNAL_MARKER, escaped, frozen_entry
from .._project.candidate import bounded, unified_diff
from .._store.files import RunDirError
from .._store.log.event_kinds import HILL_CLIMB_ITERATION
from .._store.rundir import RunDir

# a round's diff in prior_iterations/: the head, cut
PRIOR_DIFF_LIMIT = 20000


@dataclass(frozen=True)
class Round:
    """One earlier round as the next proposer sees it."""

    tag: str
    parent: str
    verdict: str  # one line: decision, basis, Δ̄, p and the gate's reason
    entries: str  # what it wrote below its journal's marker ("" when nothing)
    diff: str  # its change against its parent, unified, bounded


def verdict_line(entry: dict[str, Any], reason: str) -> str:
    """``reject (gate) vs cand_0001 (Δ̄=+0.0833, p=0.25): reason`` on one line: vs the tag it was
    gated against (a sibling re-gated after the round's accept: that accept, not its parent)."""
    word = str(entry["decision"]) + (f" ({entry['basis']})" if entry.get("basis") else "")
    parent, against = entry.get("parent"), entry.get("gated_against") or entry.get("parent")
    made = f" (made from {parent})" if against != parent else ""
    line = f"{word} vs {against}{made}{numbers(entry)}"
    reason = " ".join(reason.split())
    return f"{line}: {reason}" if reason else line


def numbers(entry: Mapping[str, Any]) -> str:
    """`` (Δ̄=+0.0833, p=0.25)`` of a booked decision, "" when it has neither (never ``-0.0000``)."""
    delta, p = entry.get("delta_mean"), entry.get("p_value")
    parts = [] if delta is None else [f"Δ̄={round(float(delta), 4) + 0.0:+.4f}"]
    parts += [] if p is None else [f"p={float(p):.4g}"]
    return f" ({', '.join(parts)})" if parts else ""


def earlier_rounds(rundir: RunDir, besides: str) -> list[Round]:
    """Every decided tag but ``besides``, in the order first decided, as a :class:`Round`."""
    decisions = rundir.decisions()
    # the standing (last) event of each tag, in the place of its first: the order decided
    standing = {str(event["tag"]): event for event in decisions if str(event["tag"]) != besides}
    rounds = []
    for tag, entry in standing.items():
        verdict, reason = _verdict_of(rundir, tag)
        rounds.append(
            Round(
                tag=tag,
                parent=str(entry.get("parent")),
                verdict=verdict_line(entry, reason),
                entries=frozen_entry(rundir, tag, decisions),
                diff=_diff_of(rundir, tag, entry, verdict),
            )
        )
    return rounds


def _verdict_of(rundir: RunDir, tag: str) -> tuple[dict[str, Any], str]:
    """The verdict file as its ``verdict`` event vouches for it, and its reason (escaped: the
    reason quotes candidate output); an edited file gives no reason but says so."""
    try:
        verdict = rundir.verdicts.checked(tag) or {}
    except RunDirError:
        return {}, "(its verdict file was edited after the gate wrote it: reason not shown)"
    return verdict, escaped(str(verdict.get("reason") or ""))


def proposals(rundir: RunDir) -> list[Mapping[str, Any]]:
    """The run's hill-climb ``proposed`` events, in order: what each optimizer run came to, and its spend."""
    return [e for e in rundir.log.of_kinds(HILL_CLIMB_ITERATION) if e.get("phase") == "proposed"]


def proposed_event(rundir: RunDir, tag: str) -> Mapping[str, Any]:
    """``tag``'s hill-climb ``proposed`` event, the last ({} when there is none)."""
    return next((e for e in reversed(proposals(rundir)) if e.get("tag") == tag), {})


def _diff_of(rundir: RunDir, tag: str, entry: dict[str, Any], verdict: dict[str, Any]) -> str:
    """hill-climb's ``diff.patch`` (made as the optimizer finished) while it is the file its
    ``proposed`` event logged, else the diff the reject logged, else the snapshots compared."""
    patch = rundir.hill_climb_dir(tag) / "diff.patch"
    digest = proposed_event(rundir, tag).get("diff_sha256")
    if isinstance(digest, str) and patch.is_file() and not patch.is_symlink():
        data = patch.read_bytes()
        if hashlib.sha256(data).hexdigest() == digest:
            return bounded(data.decode("utf-8", errors="replace"), PRIOR_DIFF_LIMIT)
    if entry.get("diff"):
        return str(entry["diff"])
    parent = str(entry.get("parent"))
    folders = compared(rundir, tag, parent, verdict)
    if folders is not None:
        try:
            return bounded(unified_diff(folders[1], folders[0], parent, tag), PRIOR_DIFF_LIMIT)
        except (OSError, ValueError):
            pass
    return ""


def render_journal(tag: str, parent: str, merged_from: list[str] | None, rounds: list[Round]) -> str:
    """A new work copy's ``JOURNAL.md``: earlier rounds' verdicts and entries, then this round's marker."""
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
