"""What the broker of ``capevolve agent`` runs for the agent, and what it refuses.

The broker runs commands with the evaluator's rights, outside the boundary, so it runs only the
loop's own commands, on the agent's project, from a folder the agent cannot write:

- ``capevolve`` commands of :data:`BROKERED`, but no flag that rewrites the record, runs the
  agent's code outside or sets the owner's gate (:data:`REFUSED_FLAGS`, :data:`GATE_FLAGS`);
  paths a command writes, reads or grants must be ones the agent may write or read;
- ``capevolve pytest ARGS`` with the options of :data:`PYTEST_FLAGS`, :data:`PYTEST_VALUED` and
  the ``--capevolve-*`` options but the owner's, and project paths outside the run dirs;
- no cwd or path through a symbolic link, which the agent could repoint after the check;
- no run but the one the agent was started in (``--run-id``, ``--capevolve-run-id``).

Everything else is refused in one line that names the way on."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from .._loop.optimizer import RUNS_FOLDER, gold_files
from .._project.spec import SPEC_FILENAME, Spec
from ..exitcodes import Refusal

BROKERED = tuple(
    "check baseline spend diagnose work eval-task mechanism gate commit merge multirep diff plan "
    "measure runs verify dashboard hill-climb".split()
)
OUTSIDE = "the person who owns the project runs it outside the agent"
REFUSED_FLAGS = {
    "repair": f"verify --repair rewrites the record; {OUTSIDE}",
    "force": f"commit --force books against the gate's rules; {OUTSIDE}",
    "new_run": (
        "a new run asks the same val tasks again at a fresh level (a no-op, varied a little each "
        f"time, is accepted by chance in one of enough runs); {OUTSIDE}, then starts the agent again"
    ),
    "anchor_from_store": f"--anchor-from-store DIR runs git in DIR; give none (its own store), or {OUTSIDE}",
}
GATE_FLAGS = ("alpha", "gate_mode", "k_se")  # hill-climb's, set the run's gate before its first decision
GATE_OWNED = f"the question the gate asks is the owner's; drop it to gate as {SPEC_FILENAME} says"
PYTEST_FLAGS = frozenset(
    {"-q", "--quiet", "-v", "--verbose", "-x", "--exitfirst", "-s", "--no-header", "--co", "--collect-only"}
)
PYTEST_VALUED = frozenset(
    {"-n", "--numprocesses", "--maxprocesses", "--dist", "--tb", "-r", "-k", "-m", "--maxfail", "--color"}
)
OWNER_VALUES = {("--capevolve-regression-rule", "noise")}  # looser than the `strict` a spec may set
PYTEST_PATHS = ("--capevolve-run", "--capevolve-finalize", "--capevolve-candidate")
CAPEVOLVE_FLAGS = frozenset(
    f"--capevolve-{name}"
    for name in "rerun gate veto-regressions sequential test-reused harness-changed explain grow".split()
)


class AgentPolicy:
    """The allowlist for one agent: its project, its run, and the folders it may write."""

    def __init__(self, spec: Spec, writable: tuple[Path, ...], run_id: str) -> None:
        self.project = spec.project_dir.resolve()
        self.run_id = run_id
        self.runs = self.project / RUNS_FOLDER
        self.writable = tuple(Path(os.path.realpath(p)) for p in writable)
        self.hidden = (self.runs, *gold_files(spec))

    def __call__(self, argv: list[str], cwd: str) -> list[str]:
        where = self._cwd(cwd)
        if not argv:
            raise Refusal("no command given; the broker runs capevolve commands (capevolve --help)")
        name = argv[0]
        if name == "pytest":
            return [sys.executable, "-P", "-m", "pytest", *self._pytest(argv[1:], where)]
        if name not in BROKERED:
            raise Refusal(
                f"the broker runs the loop's commands for an agent ({', '.join(BROKERED)}, pytest), "
                f"not {name!r}; {OUTSIDE}"
            )
        argv = list(argv)
        deliver = self._capevolve(argv, where)
        return Command([sys.executable, "-P", "-m", "pytest_capevolve._cli.main", *argv], after=deliver)

    # -- where -----------------------------------------------------------------------------------

    def _cwd(self, cwd: str) -> Path:
        real = _unlinked(Path(cwd), cwd)
        if not self._projects_own(real):
            raise Refusal(
                f"commands run from the project folder, not {cwd}; cd {self.project} and run it again"
            )
        return real

    def _projects_own(self, path: Path) -> bool:
        """In the project, but in no run dir and no folder the agent may write."""
        return (
            path.is_relative_to(self.project)
            and not path.is_relative_to(self.runs)
            and not self._writable(path)
        )

    def _writable(self, path: Path) -> bool:
        return any(path.is_relative_to(root) for root in self.writable)

    def _this_project(self, given: Path, where: Path, *, run_dir: bool = False) -> None:
        target = _unlinked(where / given, str(given))
        if target in (self.project, self.project / SPEC_FILENAME):
            return
        if run_dir and target.parent == self.runs / "runs":
            return
        raise Refusal(
            f"{given}: the broker serves the project the agent was started in ({self.project}); "
            "start capevolve agent in the other project's folder to work there"
        )

    def _this_run(self, flag: str, given: str | None) -> None:
        """Another run of the project has its own α, its own draws (its secret names the folders) and
        its own best: gating there, then adopting its accept here, would shop for a lucky run."""
        if given is not None and given != self.run_id:
            raise Refusal(
                f"{flag} {given}: the agent works in run {self.run_id}, the one it was started in; another "
                "run asks val again at that run's level and under its draws (an accept there is then "
                f"adopted here); drop {flag} to work in run {self.run_id}, or {OUTSIDE}"
            )

    # -- capevolve commands ----------------------------------------------------------------------

    def _capevolve(self, argv: list[str], where: Path) -> Callable[[], str | None] | None:
        """Checks ``argv`` (rewriting a file the broker reads or writes for the agent to a
        private copy); returns what to do once the command ended (deliver an export)."""
        from .main import build_parser, parse

        try:  # as the command will parse it (a project folder given last, after the options, too)
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                args = parse(build_parser(argv[0]), argv)
        except SystemExit:
            return None  # argparse refuses it in the command's own words, before it reads anything
        # the private copies made for the command: removed on a refusal here, else once it ended
        with contextlib.ExitStack() as copies:
            deliver = self._checked(argv, args, where, copies)
            owned = copies.pop_all()

        def after() -> str | None:
            with owned:
                return deliver() if deliver is not None else None

        return after

    def _checked(
        self, argv: list[str], args: argparse.Namespace, where: Path, copies: contextlib.ExitStack
    ) -> Callable[[], str | None] | None:
        deliver = None
        for attr, why in REFUSED_FLAGS.items():
            if getattr(args, attr, None):
                raise Refusal(why)
        self._this_run("--run-id", getattr(args, "run_id", None))
        for attr in GATE_FLAGS if argv[0] == "hill-climb" else ():  # (capevolve gate's: a what-if)
            if getattr(args, attr) is not None:
                raise Refusal(f"hill-climb --{attr.replace('_', '-')}: {GATE_OWNED}")
        for given in (getattr(args, attr, None) for attr in ("project", "project_option")):
            if given is not None:
                self._this_project(Path(given), where, run_dir=argv[0] == "verify")
        for operand in getattr(args, "operands", None) or ():  # diff: tags, or the project folder
            if (where / operand).exists():
                self._this_project(Path(operand), where)
        if (export := getattr(args, "export", None)) is not None:
            deliver = self._export(argv, export, where, copies)
        for folder in getattr(args, "writable", None) or ():  # hill-climb's: never more than the agent's own
            if not self._writable(Path(os.path.realpath(where / folder))):
                raise Refusal(
                    f"--writable {folder}: the optimizer an agent starts may write only where the agent "
                    "may (its work copies, its TMPDIR, the --writable folders it was started with)"
                )
        if (instructions := getattr(args, "instructions_file", None)) is not None:
            self._instructions(argv, instructions, where, copies)
        return deliver

    # -- files the broker reads or writes for the agent -------------------------------------------
    # The command would open them by path with the evaluator's rights, after this check: a folder
    # of the agent's replaced by a link in between (into the run dir, at a gold file) would lead it
    # there. So the broker opens them here, following no link, and the command gets a private copy.

    def _export(
        self, argv: list[str], export: str, where: Path, copies: contextlib.ExitStack
    ) -> Callable[[], str | None]:
        target = Path(os.path.realpath(where / export))  # where it leads now; written following no link
        root = next((r for r in self.writable if target.is_relative_to(r) and target != r), None)
        if root is None:
            raise Refusal(
                f"--export {export}: the broker writes only where the agent may write (its work "
                "copies, its TMPDIR); export into one of them"
            )
        private = _private_folder(copies) / target.name
        _replace_value(argv, "--export", str(private))

        def deliver() -> str | None:
            try:
                if private.exists():
                    _write_unlinked(root, target.relative_to(root), private.read_bytes())
            except OSError as exc:
                return f"error: capevolve agent: --export {export} not written: {exc.strerror or exc}\n"
            return None

        return deliver

    def _instructions(self, argv: list[str], given: str, where: Path, copies: contextlib.ExitStack) -> None:
        """Reads the file for the command into a private copy, which the command is given."""
        target = Path(os.path.realpath(where / given))  # where it leads now; read following no link
        if any(target.is_relative_to(h) for h in self.hidden):
            raise Refusal(f"--instructions-file {given}: a file the agent may not read")
        try:
            text = _read_unlinked(target)
        except OSError as exc:
            raise Refusal(
                f"--instructions-file {given}: {exc.strerror or exc} (read without following a "
                "symbolic link); give a file that stays where it is while the command runs"
            ) from None
        copy = _private_folder(copies) / "instructions.md"
        copy.write_bytes(text)
        _replace_value(argv, "--instructions-file", str(copy))

    # -- pytest sessions -------------------------------------------------------------------------

    def _pytest(self, args: list[str], where: Path) -> list[str]:
        for arg in args:
            if arg.startswith("@"):
                raise Refusal(
                    f"pytest {arg}: pytest would read more arguments from {arg[1:]}, past the "
                    "broker's checks; give them on the command line"
                )
        words = iter(args)
        for arg in words:
            option, eq, value = arg.partition("=")
            if arg.startswith("--capevolve-"):
                if option == "--capevolve-new-run":
                    raise Refusal(f"pytest {option}: {REFUSED_FLAGS['new_run']}")
                if option in CAPEVOLVE_FLAGS:
                    continue
                if not eq:
                    value = next(words, "")
                if option == "--capevolve-multiple" or (option, value) in OWNER_VALUES:
                    raise Refusal(f"pytest {option} {value}: {GATE_OWNED}")
                if option in PYTEST_PATHS:
                    self._session_path(option, value, where)
                self._this_run(option, value if option == "--capevolve-run-id" else None)
                continue
            if option in PYTEST_FLAGS or _short_flags(arg):
                continue
            if option in PYTEST_VALUED:
                if not eq:
                    next(words, None)
                continue
            if _short_valued(arg) or arg.startswith(("-pno:", "-p=no:")):
                continue
            if arg == "-p":
                plugin = next(words, "")
                if plugin.startswith("no:"):
                    continue
                arg = f"-p {plugin}"
            if arg.startswith("-"):
                raise Refusal(
                    f"pytest {arg}: not an option the broker passes (it could load code or write a "
                    "file of the agent's choosing); the --capevolve-* options, -q/-v/-x/-s, -n, "
                    f"--tb, -r, -k, -m and -p no:NAME are; {OUTSIDE} for the rest"
                )
            self._collected(arg, where)
        return args

    def _session_path(self, option: str, value: str, where: Path) -> None:
        if option == "--capevolve-candidate":
            target = Path(os.path.realpath(where / value))
            if not target.is_relative_to(self.project):
                raise Refusal(
                    f"--capevolve-candidate {value}: a candidate of this project is a work copy "
                    "(capevolve work new TAG) or a folder in the project"
                )
            return
        self._this_project(Path(value), where)

    def _collected(self, arg: str, where: Path) -> None:
        target = _unlinked(where / arg.split("::", 1)[0], arg)
        if not self._projects_own(target):
            raise Refusal(
                f"pytest {arg}: the broker collects only the project's own files (its microcases, "
                "tests), never a folder the agent may write; name them by their place in the project"
            )


class Command(list[str]):
    """The command line the broker runs, and what it does once that command ended."""

    def __init__(self, argv: list[str], after: Callable[[], str | None] | None = None) -> None:
        super().__init__(argv)
        self.after = after


def _private_folder(copies: contextlib.ExitStack) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="capevolve-broker-"))
    copies.callback(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _replace_value(argv: list[str], option: str, value: str) -> None:
    """``option``'s value in ``argv`` (``--opt V`` or ``--opt=V``) made ``value``."""
    for i, word in enumerate(argv):
        if word == option and i + 1 < len(argv):
            argv[i + 1] = value
        elif word.startswith(option + "="):
            argv[i] = f"{option}={value}"


_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _open_unlinked(root: Path, parts: tuple[str, ...], flags: int, *, make: bool) -> int:
    """A descriptor of ``root/parts…`` opened with ``flags``, no part of its way a link (ELOOP/ENOTDIR
    otherwise); ``make``: the folders on its way are made where missing."""
    *folders, name = parts
    fd = os.open(root, _NOFOLLOW_DIR)
    try:
        for part in folders:
            if make:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
            inner = os.open(part, _NOFOLLOW_DIR, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(name, flags | os.O_NOFOLLOW, 0o644, dir_fd=fd)
    finally:
        os.close(fd)


def _write_unlinked(root: Path, relative: Path, data: bytes) -> None:
    """Write ``data`` to ``root/relative`` following no link below ``root`` (a folder the broker
    granted the agent; the folders above it are not the agent's to change)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    with os.fdopen(_open_unlinked(root, relative.parts, flags, make=True), "wb") as handle:
        handle.write(data)


def _read_unlinked(path: Path) -> bytes:
    """The bytes of ``path`` (absolute), following no link anywhere on its way."""
    with os.fdopen(
        _open_unlinked(Path(path.anchor), path.parts[1:], os.O_RDONLY, make=False), "rb"
    ) as stream:
        return stream.read()


def _unlinked(path: Path, given: str) -> Path:
    """``path``, absolute, once no part of it is a symbolic link (else refused): the command runs
    with the path as given, and a link could lead it elsewhere after this check."""
    plain = Path(os.path.abspath(path))
    real = Path(os.path.realpath(path))
    if plain != real:
        raise Refusal(f"{given}: it passes through a symbolic link (it leads to {real}); give the real path")
    return real


def _short_flags(arg: str) -> bool:
    """``-q``, ``-vv``, ``-qx``: short flags without a value, combined."""
    return len(arg) > 1 and arg[0] == "-" and arg[1] != "-" and set(arg[1:]) <= set("qvxs")


def _short_valued(arg: str) -> bool:
    """``-n2``, ``-nauto``, ``-rA``, ``-kname``: a short valued option with its value attached."""
    return len(arg) > 2 and arg[0] == "-" and arg[1] in "nrkm" and arg[1] != "-"
