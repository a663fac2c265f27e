"""The commands that resume an interrupted session and that complete a session's missing rollouts.

Controller only. The command typed, pinned to the run and, for a re-run, naming its fresh tags, so it pays
only what is missing; completing leaves out the flags that deselected or stopped rollouts."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

# options that take a value, and the flags, that the resume command replaces
_VALUED = ("--capevolve-run-id", "--capevolve-candidate", "--capevolve-tag")
_FLAGS = ("--capevolve-new-run", "--capevolve-rerun")
# what deselects rollouts: left out of the command that completes the missing ones
_DESELECTING_VALUED = ("-k", "-m", "--deselect", "--maxfail")
_DESELECTING_FLAGS = (
    "--lf",
    "--last-failed",
    "--ff",
    "--failed-first",
    "-x",
    "--exitfirst",
    "--sw",
    "--stepwise",
    "--stepwise-skip",
)
# pytest's short flags that take no value: ``-xq`` is ``-x -q`` (the ``x`` left out, the rest kept)
_SHORT_FLAGS = frozenset("vqslx")


def _without(args: Sequence[str], valued: Sequence[str], flags: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            continue
        if arg in flags:
            continue
        if arg in valued:
            skip_value = True
            continue
        if any(arg.startswith(f"{option}=") for option in valued):
            continue
        if any(len(option) == 2 and arg.startswith(option) for option in valued):
            continue  # a short option joined to its value: -k"not slow"
        kept.append(arg)
    return kept


def _without_stops(args: Sequence[str]) -> list[str]:
    """``args`` without the node ids that select rollouts and without ``-x`` in a cluster of short flags
    (``-xvs`` → ``-vs``); after ``--``, untouched."""
    kept: list[str] = []
    for arg in args:
        if "::" in arg and not arg.startswith("-"):
            continue  # a rollout's node id: the rest is missing too
        letters = arg[1:]
        if arg.startswith("-") and not arg.startswith("--") and len(letters) > 1 and "x" in letters:
            if set(letters) <= _SHORT_FLAGS:
                arg = "-" + letters.replace("x", "")
        kept.append(arg)
    return kept


def resume_command(
    args: Sequence[str],
    run_id: str,
    *,
    rerun_candidates: Sequence[tuple[str, Path]] = (),
    complete: bool = False,
) -> str:
    """``pytest ARGS`` as typed, minus ``--capevolve-new-run``, pinned to ``run_id``; a
    ``--capevolve-rerun``'s candidates named by their fresh tags. ``complete``: without the deselecting
    flags."""
    rerun = "--capevolve-rerun" in args
    valued = _VALUED if rerun else ("--capevolve-run-id",)
    kept = _without(args, valued, _FLAGS)
    if complete:
        kept = _without_stops(_without(kept, _DESELECTING_VALUED, _DESELECTING_FLAGS))
    for tag, folder in rerun_candidates if rerun else ():
        kept += ["--capevolve-candidate", str(folder), "--capevolve-tag", tag]
    return shlex.join(["pytest", *kept, "--capevolve-run-id", run_id])
