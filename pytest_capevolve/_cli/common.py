"""What every ``capevolve`` command shares: its project and run, its errors, and its printer.

A project or run not found is a :class:`UsageError`, in the same words for every command."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from .. import exitcodes
from .._project.spec import SPEC_FILENAME, Spec, SpecError, load_spec
from .._store.rundir import RunDir, RunDirError
from ..exitcodes import CapevolveError, Refusal, UsageError

JSON_DIGITS = 6  # loop JSON: derived statistics to 6 decimals (stored files keep full precision)

Lines = Callable[[Any], list[str]]


OPENED: list[RunDir] = []  # runs a command read: their notices (damage handled) are printed


def add_project_args(
    parser: argparse.ArgumentParser, *, run_id: bool = True, positional: bool = True
) -> None:
    """PROJECT (optional), ``--project``, ``--run-id`` and ``--json``; ``positional=False``
    where positionals are tags (``merge A B C``: a folder would be ambiguous)."""
    if positional:
        parser.add_argument("project", type=Path, nargs="?", help="project folder (default .)")
    parser.add_argument(
        "--project",
        dest="project_option",
        type=Path,
        metavar="DIR",
        help="project folder (default .)" if not positional else "the same, as an option",
    )
    if run_id:
        parser.add_argument("--run-id", help="a run of the project (default: the newest)")
    parser.add_argument("--json", action="store_true", help="print only JSON on stdout (the rest to stderr)")


def add_dropped(parser: argparse.ArgumentParser, flag: str, instead: str) -> None:
    """A flag that is gone, kept hidden so that passing it says what to use ``instead`` (exit 2)."""

    def refuse(_value: str) -> None:
        raise argparse.ArgumentTypeError(f"{flag} was dropped; {instead}")

    parser.add_argument(flag, help=argparse.SUPPRESS, type=refuse)


def project_of(args: argparse.Namespace) -> Path:
    """The project of a command: the positional or ``--project`` (not two different ones)."""
    positional, option = getattr(args, "project", None), getattr(args, "project_option", None)
    if positional is not None and option is not None and positional.resolve() != option.resolve():
        raise UsageError(f"two projects given ({positional} and --project {option}); give one")
    return positional or option or Path(".")


def project_given(args: argparse.Namespace) -> bool:
    """Whether the command line named a project (a command may find one another way)."""
    return getattr(args, "project", None) is not None or getattr(args, "project_option", None) is not None


def existing_project(args: argparse.Namespace) -> Path:
    """The project folder of a command, refused in the one same line when it does not exist."""
    project = project_of(args)
    if not project.exists():
        raise UsageError(f"no such project folder: {project}; give a folder holding {SPEC_FILENAME}")
    return project


def project_folder(args: argparse.Namespace) -> Path:
    """The project folder of a command, refused when it holds no spec, in those words."""
    project = existing_project(args)
    if project.is_dir() and not (project / SPEC_FILENAME).is_file():
        raise UsageError(
            f"no {SPEC_FILENAME} in {project.resolve()}; run `capevolve {args.command}` in a project "
            "folder, or give the project folder as its PROJECT argument"
        )
    return project


@contextlib.contextmanager
def said_as(error: type[CapevolveError], *kinds: type[Exception]) -> Iterator[None]:
    """An error of ``kinds`` raised inside, raised again as ``error`` (its exit code) in its words."""
    try:
        yield
    except kinds as exc:
        raise error(str(exc)) from None


def spec_of(args: argparse.Namespace) -> Spec:
    """The project's spec; outside a project, says so in those words."""
    project = project_folder(args)
    with said_as(UsageError, SpecError):
        return load_spec(project)


def open_run(args: argparse.Namespace, *, splits: bool = True) -> tuple[Spec, RunDir]:
    """The spec and the run (``--run-id``, default the newest) of a command that reads a run;
    with ``splits``, refused unless the run has frozen its splits (has rollouts)."""
    spec = spec_of(args)
    with said_as(UsageError, RunDirError):
        rundir = RunDir.resolve(spec.project_dir, getattr(args, "run_id", None), create=False)
    OPENED.append(rundir)  # what it finds damaged and handles is said on stderr at the end
    if splits and rundir.splits() is None:
        from .._project.way_on import evaluate_first

        raise UsageError(f"run {rundir.run_id} has no rollouts yet; {evaluate_first(spec.project_dir)}")
    return spec, rundir


def val_ids(rundir: RunDir) -> list[str]:
    """The run's frozen val task ids (empty before its first session)."""
    return list((rundir.splits() or {}).get("val", []))


def human(args: argparse.Namespace) -> TextIO:
    """Where text for people goes: stdout, or stderr when stdout carries ``--json``."""
    return sys.stderr if getattr(args, "json", False) else sys.stdout


def print_json(answer: Any) -> None:
    """One JSON value on stdout (paths and other objects as their ``str``)."""
    print(json.dumps(answer, sort_keys=True, ensure_ascii=False, default=str))


def emit(args: argparse.Namespace, answer: Any, lines: Lines | None, *, json_default: bool = False) -> int:
    """Print a command's answer: ``lines(answer)`` for people (stderr under ``--json``) and JSON
    with ``--json``; loop primitives (``json_default``) print JSON unless ``--table``. Returns OK."""
    table = getattr(args, "table", False)
    if table and args.json:
        raise Refusal("--table and --json ask for two different outputs; give one")
    if json_default and not table:
        from .._show.numbers import rounded

        print_json(rounded(answer, JSON_DIGITS))
        return exitcodes.OK
    for line in lines(answer) if lines else []:
        print(line, file=human(args))
    if args.json:
        print_json(answer)
    return exitcodes.OK


def report_error(command: str, exc: CapevolveError | OSError) -> int:
    """Print a command's error as one line on stderr; return the exit code it carries."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: capevolve {command} could not write {where}{exc.strerror or exc}", file=sys.stderr)
        return exitcodes.INFRA_FAILURE
    said = f"capevolve {command} refused: " if exc.exit_code == exitcodes.REFUSED else ""
    print(f"error: {said}{exc}", file=sys.stderr)
    return exc.exit_code


def print_notices() -> None:
    """The damage the runs a command opened found and handled, as warnings on stderr."""
    for rundir in OPENED:
        for notice in rundir.notices:
            print(f"warning: {notice}", file=sys.stderr)
