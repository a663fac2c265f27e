"""The ``capevolve`` command: its parser (:data:`HELP` is what ``--help`` says) and ``main``,
which runs one command and turns its error into one line and an exit code (:mod:`..exitcodes`)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import exitcodes
from .._store.rundir import RunDirError
from ..exitcodes import CapevolveError, Refusal, UsageError
from .common import OPENED, print_notices, report_error

# Each group's module registers its commands; ``main`` registers only the group of the command
# asked for (``--help``: every group), so a command does not pay for importing the others.
GROUPS: dict[str, tuple[str, ...]] = {
    "project": ("init", "check", "microcase", "import-cap-evolve", "skills"),
    "reading": ("runs", "verify", "plan", "measure", "dashboard"),
    "decisions": ("gate", "commit", "baseline"),
    "loop": tuple("work spend diagnose diff multirep merge eval-task mechanism hill-climb".split()),
    "compare": ("compare",),
    "agent": ("agent", "pytest"),
}

HELP = (
    "Make and check a project (init, check), measure its seed (baseline), run its loop (work, "
    "commit, hill-climb, agent), read its run dir (spend, measure, dashboard, gate, diff, …) and "
    "decide results you already have (compare). A command that reads a project takes it as an "
    "optional positional (default .; --project DIR is the same) and --run-id; --json prints only "
    "JSON on stdout, everything meant for people going to stderr. Exit codes: 0 done, 1 a check "
    "found a problem, 2 refused, 4 usage or spec error; compare and gate as a gate session (10 "
    "reject, 11 indecisive) — every code in docs/reference/exit-codes.md."
)


JUDGE_NOISE_GONE = (
    "judge-noise is gone: a gate session's verdict carries the judge's and the agent's share of the "
    "delta's variance from the recorded re-scores (capevolve gate TAG --json: its judge_noise)"
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; of ``command``'s group only, when it names a command."""
    from .. import __version__

    parser = argparse.ArgumentParser(prog="capevolve", description=HELP)
    parser.add_argument("--version", action="version", version=f"capevolve (pytest-capevolve) {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = [g for g, names in GROUPS.items() if command in names] or list(GROUPS)
    for group in chosen:
        importlib.import_module(f".{group}", __package__).register(sub)
    return parser


def parse(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.Namespace:
    """``words`` parsed, with the project folder also taken last, after the options
    (``capevolve commit TAG --decision accept .``): argparse gives an optional positional nothing
    once an option follows the one before it, and said "unrecognized arguments: ."."""
    args, extra = parser.parse_known_args(words)
    if extra:
        late = len(extra) == 1 and not extra[0].startswith("-")
        if not (late and getattr(args, "project", Path()) is None):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.project = Path(extra[0])
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run the command, print its error as one line; return its exit code."""
    words = sys.argv[1:] if argv is None else list(argv)
    from .agent import USAGE as AGENT_USAGE
    from .agent import forwarded, run_pytest

    try:
        code = forwarded(words)  # inside `capevolve agent`: the broker runs it, outside the boundary
    except BrokenPipeError:  # `| head` inside an agent: the same silent 141 as outside
        return _pipe_closed()
    if code is not None:
        return code
    if words[:1] == ["pytest"] and words[1:2] not in (["-h"], ["--help"]):
        return run_pytest(words[1:])
    agent_argv = None
    if words[:1] == ["agent"] and "--" in words:  # its options, and the agent's command line
        at = words.index("--")
        words, agent_argv = words[:at], words[at + 1 :]
    if words[:1] == ["judge-noise"]:
        return report_error("judge-noise", UsageError(JUDGE_NOISE_GONE))
    args = parse(build_parser(words[0] if words else None), words)
    if agent_argv is not None:
        args.agent_argv = agent_argv
    args.words = words  # a way on into a new run repeats them
    OPENED.clear()
    try:
        if args.command == "agent" and not agent_argv:
            said = "give the agent's command after --" if agent_argv is None else "no command after --"
            raise UsageError(f"{said}: {AGENT_USAGE}")
        return int(args.func(args))
    except CapevolveError as exc:  # the one root: each error carries its exit code
        if isinstance(exc, RunDirError) and getattr(args, "refusals", False):
            exc = Refusal(str(exc))  # damage found mid-command: a refusal for the loop's commands
        return report_error(args.command, exc)
    except BrokenPipeError:  # `| head` stopped reading: no error line, and no second one at exit
        return _pipe_closed()
    except OSError as exc:  # a full disk, a read-only run dir: one line naming the file, no traceback
        return report_error(args.command, exc)
    finally:
        print_notices()


def _pipe_closed() -> int:
    """The reader of stdout went away: nothing more is printed, and no second error at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return exitcodes.PIPE_CLOSED


if __name__ == "__main__":
    sys.exit(main())
