"""The exit codes of capevolve's sessions and ``capevolve`` command, fixed so a CI job can
branch on the outcome, and the one error root that carries them (:class:`CapevolveError`).
docs/reference/exit-codes.md is generated from the tables below: keep their layout (a title
line, then ``====`` rules around rows of a code and its meaning).

Sessions (and ``capevolve gate``, which re-derives a session's verdict; ``capevolve compare``: 0, 10, 11):

====  =====================================================================================
0     complete; every gated candidate accepted
10    a gated candidate was rejected
11    a verdict was indecisive (coverage, tamper, error-rate imbalance)
13    provisional: no gated candidate was rejected, but one is provisional — Δ̄ > 0 under the
      bar with a look left (``--capevolve-grow`` it); not a reject
12    incomplete: a worker died, rollouts could not be produced (infra errors), or rollouts
      the session owed were not run (deselected with ``-k``/``-m``/``--deselect``, left out by
      node ids, skipped by a mark, not reached after ``-x``) — the summary prints the command
      that completes them
14    what-if (``capevolve gate`` only): an override (``--against``, ``--gate-mode``,
      ``--k-se``, ``--alpha``, ``--veto-regressions``) departs from the settings the tag was
      decided under, or the tag was decided by the sequential gate (which ``capevolve gate``
      does not replay); the answer is printed marked WHAT-IF and is not the decision, whatever
      it says — never 0, so no script reads it as an accept
15    repeat of an accepted decision: no gated candidate was rejected, but one is byte-identical
      to bytes already accepted (in this run or another of the project); nothing new was
      decided or booked, and nothing paid for it — not a reject, not a new accept
====  =====================================================================================

The ``capevolve`` command (chosen once, for every subcommand, in :mod:`.._cli`):

====  =====================================================================================
1     a check found a problem (``check``'s FAIL, ``verify``'s TAMPERED/MISMATCH)
2     a loop command refused an action on a run it could open (unknown tag, a second
      decision, the sealed split, ``--table`` with ``--json``) — and argparse's own exit for
      arguments it cannot parse (unknown flag, missing TAG), which argparse raises itself
3     ``hill-climb``: an evaluation did not complete; ``--resume`` continues it
4     usage / spec error — pytest's own 4: no such project folder, no capevolve.yaml, a spec
      that does not load, no such run, a run with nothing to read yet, two different projects
      given. The same code, with one ``error: …`` line, for every command that reads a project
141   the reader of its output went away (``| head`` closed the pipe early): nothing more is
      printed and what the command did stands — the code a shell gives a writer SIGPIPE ended
====  =====================================================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

OK = 0
REJECTED = 10
INDECISIVE = 11
INFRA_FAILURE = 12
PROVISIONAL = 13
WHAT_IF = 14
REPEATED = 15

CHECK_FAILED = 1
REFUSED = 2
LOOP_INCOMPLETE = 3
USAGE = 4
PIPE_CLOSED = 141

# pytest's OK, TESTS_FAILED and NO_TESTS_COLLECTED, which a session replaces with its own (a task
# the agent failed is not a failed session); by value, so ``capevolve gate`` needs no pytest
REPLACEABLE = (0, 1, 5)


def for_decisions(shown: Iterable[str]) -> int:
    """A gate's exit code from the decisions its verdicts stand for (``shown_decision``'s words):
    indecisive over reject over provisional over repeat (of an accepted decision) over accept."""
    words = set(shown)
    if "indecisive" in words:
        return INDECISIVE
    if words & {"reject", "inconclusive"}:
        return REJECTED
    if "provisional" in words:
        return PROVISIONAL
    if "repeat" in words:
        return REPEATED
    return OK


def first_few(problems: Sequence[str], limit: int = 3) -> str:
    """A refusal's list of what it found: the first ``limit``, then how many more (the rest are
    for ``capevolve verify`` or the file they name, not for one line)."""
    more = f"; and {len(problems) - limit} more" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


class CapevolveError(Exception):
    """The root of what capevolve refuses on purpose: the message says what was refused, why,
    and the way on for an honest user. ``exit_code`` travels on the class; a session turns the
    error into one ``pytest.UsageError`` line (exit 4)."""

    exit_code: ClassVar[int] = USAGE


class UsageError(CapevolveError):
    """Bad arguments, or a project or run that cannot be read: ``error: …``, exit 4."""


class Refusal(CapevolveError):
    """An action will not be done as asked on a run that could be opened (no run yet, unknown
    tag, a second decision, the sealed split): one line, ``error: capevolve CMD refused: …``,
    exit 2. Raised by the loop primitives below the CLI and by the commands themselves."""

    exit_code = REFUSED
