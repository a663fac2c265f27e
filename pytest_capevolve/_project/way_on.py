"""A refusal's way on as a command the user can paste: ``PROJECT`` made the project's path; in a pytest
session the user's flags (``-n 2``) in each ``pytest --capevolve-…``; into a new run, the command typed."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from contextvars import ContextVar
from pathlib import Path

_PROJECT = re.compile(r"\bPROJECT\b")
_SESSION = re.compile(r"\bpytest (?=--capevolve-)")
_NEW_RUN = re.compile(r"\bpytest --capevolve-run (?:'[^']*'|\S+) --capevolve-new-run\b")
_LOOP_NEW_RUN = re.compile(r"\bcapevolve hill-climb (?:(?:'[^']*'|\S+) )?--new-run\b")  # PROJECT made a path
# capevolve's flags that take no value (plugin.py's ``flag(…)``): the word after one is not theirs
_FLAGS = "rerun gate veto-regressions sequential test-reused harness-changed explain grow new-run"
VALUELESS = frozenset(f"--capevolve-{name}" for name in _FLAGS.split())
# the `capevolve hill-climb …` words being run: its ways into a new run keep the user's --optimizer …
LOOP_WORDS: ContextVar[Sequence[str] | None] = ContextVar("LOOP_WORDS", default=None)


def shown(project_dir: Path) -> str:
    """The project as a command names it: relative to the current folder when that is shorter."""
    absolute = str(Path(project_dir).absolute())
    relative = os.path.relpath(absolute) if os.name != "nt" else absolute  # Windows: maybe another drive
    return min(relative, absolute, key=len)


def no_such_candidate(folder: Path) -> str:
    """``--capevolve-candidate FOLDER`` that is no folder, and the way on: the folders beside where it
    was looked for, as typed (a misspelt ``candidates/convert-unit`` said only "no such folder")."""
    parent = folder.parent
    beside = (
        sorted(p.name for p in parent.iterdir() if p.is_dir() and not p.name.startswith("."))
        if parent.is_dir()
        else []
    )
    named = ", ".join(shlex.quote(str(parent / name)) for name in beside[:5]) + (
        " …" if len(beside) > 5 else ""
    )
    way_on = (
        f"name one of the folders there: {named}"
        if beside
        else "give the folder that holds the candidate (a changed copy of the spec's capability_path)"
    )
    return f"--capevolve-candidate {folder}: no such folder; {way_on}"


def candidate_folder(tag: str, project_dir: Path | None, otherwise: str) -> str:
    """The project's ``candidates/TAG`` as a way on names it, when that folder exists (a folder's name
    is its tag); else ``otherwise`` (a placeholder, or words that say what to give)."""
    if project_dir is None or tag in ("", ".", ".."):
        return otherwise
    folder = project_dir / "candidates" / tag
    return shlex.quote(shown(folder)) if folder.is_dir() else otherwise


def pasteable(text: str, project_dir: Path | None = None, args: Sequence[str] | None = None) -> str:
    """``text`` with ``PROJECT`` the project's path and, given the session's arguments, the user's own
    flags in every ``pytest --capevolve-…`` command it names; a new run's, the command typed."""
    if project_dir is not None:  # first: a PROJECT in the words typed is theirs, already quoted
        text = _PROJECT.sub(shlex.quote(shown(project_dir)).replace("\\", "\\\\"), text)
    if (loop := LOOP_WORDS.get()) is not None:
        typed = shlex.join(["capevolve", *new_run_words(loop)])
        text = _LOOP_NEW_RUN.sub(typed.replace("\\", "\\\\"), text)
    flags, ours = own_flags(args or ())
    names = [a.split("=")[0] for a in ours]
    if "--capevolve-run" in names:  # the command typed, in a new run: its candidates, gate, … kept
        kept = [a for i, a in enumerate(ours) if "--capevolve-run-id" not in (names[i], *ours[i - 1 : i])]
        typed = shlex.join(["pytest", *flags, *kept, "--capevolve-new-run"])
        text = _NEW_RUN.sub(typed.replace("\\", "\\\\"), text)
    return _SESSION.sub(f"pytest {shlex.join(flags)} ".replace("\\", "\\\\"), text) if flags else text


def evaluate_first(project_dir: Path) -> str:
    """The way on where a command needs a run, or rollouts, that do not exist yet."""
    return f"evaluate first: pytest --capevolve-run {shlex.quote(shown(project_dir))}"


def diagnose_commands(tags: Sequence[str], project_dir: Path | None, *flags: str, most: int = 2) -> str:
    """```capevolve diagnose TAG PROJECT FLAGS…``` of each of the first ``most`` tags (in order, each
    once), pasteable as printed and joined with " or ": what the failed rollouts did and why."""
    after = "".join(f" {shlex.quote(flag)}" for flag in flags)
    named = list(dict.fromkeys(tags))[:most]
    commands = [f"`capevolve diagnose {shlex.quote(tag)} PROJECT{after}`" for tag in named]
    return pasteable(" or ".join(commands), project_dir)


def commit_command(
    tag: str, decision: str, project_dir: Path | None, run_id: str | None, *flags: str, absolute: bool = False
) -> str:
    """``capevolve commit TAG PROJECT --run-id RUN --decision DECISION FLAGS…``, each word shell-quoted:
    the one spelling of every ``capevolve commit`` a way on prints, so that a line pasted after a newer
    run of the project began, or from another folder, books into the run and project that printed it
    (without ``--run-id`` it books into the newest run: "unknown tag", or the wrong run).

    ``project_dir`` None leaves the word ``PROJECT`` (:func:`pasteable` makes it the path); ``run_id``
    None leaves the run out, where the caller has no run yet (its comment says why); ``absolute`` names
    the project by its absolute path, for text read from another folder (a work copy's handover). A
    decision the user chooses (``accept|reject``, ``…``) is printed as it is; every other word is quoted."""
    where = "PROJECT"
    if project_dir is not None:
        where = shlex.quote(str(Path(project_dir).absolute()) if absolute else shown(project_dir))
    ran = ["--run-id", shlex.quote(run_id)] if run_id else []
    chosen = decision if re.search(r"[|…]|\.\.\.", decision) else shlex.quote(decision)
    words = [shlex.quote(tag), where, *ran, "--decision", chosen, *map(shlex.quote, flags)]
    return " ".join(["capevolve", "commit", *words])


def unjudged(tag: str, run_id: str, project_dir: Path | None, *, finalized: bool = False) -> str:
    """What a tag paid on val that no session judged is: no verdict (a gate cut off, by Ctrl-C or a
    kill, or an evaluation without ``--capevolve-gate``, decided nothing: not a reject, nor a null
    result), and the gate session that pays only the missing rollouts and judges it; in a finalized
    run, which chooses no new best, that session in a new run. The one wording of ``capevolve gate``,
    ``measure``, report.md, the dashboard and the finalize summary."""
    folder = candidate_folder(tag, project_dir, "CANDIDATE_FOLDER")
    where = shlex.quote(shown(project_dir)) if project_dir is not None else "PROJECT"
    said = (
        f"no session has judged {tag!r} in run {run_id} (a gate cut off, or a session that evaluated it "
        "without --capevolve-gate): this is no verdict. "
    )
    if finalized:
        return said + (
            "This run is finalized, so it chooses no new best: a gate session in a new run judges it: "
            f"`pytest --capevolve-run {where} --capevolve-candidate {folder} --capevolve-gate "
            "--capevolve-new-run`"
        )
    return said + (
        "A gate session pays only the missing rollouts and judges it: `pytest --capevolve-run "
        f"{where} --capevolve-run-id {run_id} --capevolve-candidate {folder} --capevolve-gate`"
    )


def own_flags(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the user's flags, capevolve's options with their values) among a session's arguments, as typed."""
    args = [str(a) for a in args]
    ours = {i for i, a in enumerate(args) if a.startswith("--capevolve-")}
    valued = {i for i in ours if "=" not in args[i] and args[i] not in VALUELESS}
    ours |= {i + 1 for i in valued if not (args[i + 1 : i + 2] or ["-"])[0].startswith("-")}
    return [a for i, a in enumerate(args) if i not in ours], [a for i, a in enumerate(args) if i in ours]


def new_run_words(words: Sequence[str]) -> list[str]:
    """``capevolve`` words as typed, in a new run: ``--run-id ID`` and ``--resume`` left out, as argparse
    reads them (``--run-i ID``, ``--res``: an abbreviation it took is no other option's)."""
    out: list[str] = []
    for i, word in enumerate(words):
        name = word.split("=")[0]
        dropped = len(name) > 2 and any(o.startswith(name) for o in ("--run-id", "--resume", "--new-run"))
        its_value = i and words[i - 1].startswith("--ru") and "--run-id".startswith(words[i - 1])
        if not dropped and not its_value:
            out.append(word)
    return [*out, "--new-run"]
