"""The harness a run measures with: the adapter and what it imports, its data and config files,
the microcases, every ``conftest.py`` — and the tasks themselves.

An optimizer with a shell could change what "better" means without touching a candidate (the
scorer, a gold answer, a ``conftest.py`` that rewrites reports). So the harness is fingerprinted
when the run begins, and every later session and decision compares it with the files as they
are now: a changed harness is refused — a new run measures a new harness. What counts is listed
in :func:`of_project`; files the adapter reads at run time that no glob names are not held (list
them in ``harness_files``). Pure: paths in, digests out.

pytest imports every ``conftest.py`` from its ``confcutdir`` (the rootdir, which an empty config
above the project moves up) down, so conftests above the project and the config file's location
are part of the fingerprint, and the sessions capevolve starts itself are :func:`pinned` at the
project. A ``-p NAME`` plugin module in the project could wrap the scorer outside the lock: it is
refused (:func:`plugins_in_project`); a project's hooks belong in its locked ``conftest.py``.
pytest puts a conftest's folder first on ``sys.path``, so a file there named after a module the
scoring process imports at first use would run in its place: such files are locked
(:func:`_shadowing`), and the config file is parsed without the project on ``sys.path``.

The tamper guard (:func:`tampered`): a candidate may not change what scores it.
``protected_paths`` are globs relative to a candidate folder (``.gitignore``-like: anchored with
a ``/``, ``**`` across segments, ``dir/`` for all under it). A protected file a candidate
changed, added or removed against the seed, or a symlink leaving the folder, makes it
**indecisive**: never scored, no rollout paid. Controller only, at planning."""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._confine.landlock import real_paths
from . import microcase, startup_hooks
from .candidate import CandidateError, compare_digests, file_digests
from .spec import Spec

DEFAULT_WORD = "default"
# the evaluation data: gold and answer files, tasks/ and data/ (also the harness's default)
EVALUATION_DATA = tuple(
    "gold gold.* gold_* gold-* *.gold.* *_gold.* *-gold.* answers* answer_key* answer-key* tasks/** "
    "data/**".split()
)
# What `default` stands for. The adapter's own file name is added from the spec.
DEFAULT_PROTECTED = (
    *EVALUATION_DATA,
    *"tests/** conftest.py".split(),  # the project's own tests
    *"scorer*.py score.py scoring*.py grader*.py reward*.py".split(),  # scorers
    # the run's own configuration, and the microcases that screen candidates
    *"capevolve.yaml splits.json microcases/**".split(),
)
# a glob's wildcards as regular expressions; every other character stands for itself
_WILDCARDS = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
_WILDCARD = re.compile(r"(\*\*/|\*\*|\*|\?)")
CONFIG_FILE_KEY = "<pytest config file>"  # the config file's place, in every lock
CONFTEST_PREFIX = "<conftest> "
NO_CONFIG = "none"
CONFIG_NAMES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
# folders never walked for conftest.py: run dirs, caches, environments, VCS
SKIP_DIRS = frozenset({".capevolve", ".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", ".tox"})
TASKS_KEY = "<tasks>"
PYTEST_CONFIG_KEY = "<pytest config>"
PYTEST_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")
# what `harness_files: [default]` stands for: the evaluation data, as the tamper guard names it
DEFAULT_HARNESS_FILES = EVALUATION_DATA


def fingerprint(
    project_dir: Path, adapter_ref: str, *, exclude: Iterable[Path] = (), extra_files: Iterable[Path] = ()
) -> dict[str, str]:
    """sha256 of every harness file by its path relative to ``project_dir``, less the candidate
    folders in ``exclude``; ``extra_files`` that are missing are skipped (the spec reports them)."""
    project_dir = project_dir.resolve()
    adapter_file = (project_dir / adapter_ref.partition(":")[0]).resolve()
    # real paths as strings, in Path's order (part by part): pathlib's resolve, is_relative_to and
    # relative_to cost 75 µs a file, 1.5 s of each session's start for 20,000 data files
    files = {os.fspath(p) for p in _import_closure(adapter_file, project_dir)}
    conftests = [path for path in _walk(project_dir) if os.path.basename(path) == "conftest.py"]
    files.update(conftests)
    files.update(_shadowing(conftests))
    files.update(real_paths(p for p in extra_files if os.path.isfile(p)))
    skip = [os.fspath(p.resolve()) for p in exclude]
    inside = tuple(_folder_prefix(folder) for folder in skip)
    root = _folder_prefix(os.fspath(project_dir))
    digests = {}
    for path in sorted(files, key=lambda path: path.split("/")):
        if path.startswith(root) and not path.startswith(inside) and path not in skip:
            with open(path, "rb") as file:
                digests[path[len(root) :]] = hashlib.sha256(file.read()).hexdigest()
    return digests


def _shadowing(conftests: Iterable[str]) -> Iterator[str]:
    """The project's modules that would be imported in place of one of the interpreter's (the
    standard library's, an installed package's): those at the top of each folder pytest puts first
    on ``sys.path`` for a ``conftest.py`` (its first folder up with no ``__init__.py``), where the
    scoring process would import them at a module's first use."""
    tops = set()
    for conftest in conftests:
        folder = os.path.dirname(conftest)
        while os.path.isfile(os.path.join(folder, "__init__.py")) and folder != os.path.dirname(folder):
            folder = os.path.dirname(folder)
        tops.add(folder)
    # the interpreter's own folders only: what else this process has on sys.path is not the project's
    installed = [p for p in sys.path if _beneath_prefix(os.path.abspath(p or "."))]
    for top in sorted(tops):
        with contextlib.suppress(OSError), os.scandir(top) as listing:
            for entry in listing:
                name, package = entry.name.removesuffix(".py"), entry.is_dir(follow_symlinks=False)
                if package and not os.path.isfile(os.path.join(entry.path, "__init__.py")):
                    continue  # a namespace folder never wins over a module found later on sys.path
                if (package or name != entry.name) and name.isidentifier() and _shadows(name, installed):
                    yield from (_walk(Path(entry.path)) if package else [entry.path])


def _beneath_prefix(path: str) -> bool:
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return any(path == p or path.startswith(_folder_prefix(p)) for p in prefixes)


def _inside(entry: str, project_dir: Path) -> bool:
    """Whether the ``sys.path`` entry is a folder of the project's own (an environment inside it is not)."""
    path = os.path.abspath(entry or ".")
    if _beneath_prefix(path):
        return False
    return path == os.fspath(project_dir) or path.startswith(_folder_prefix(os.fspath(project_dir)))


def _shadows(name: str, outside: list[str]) -> bool:
    if name in sys.stdlib_module_names:
        return True
    with contextlib.suppress(ImportError, ValueError):
        return importlib.machinery.PathFinder.find_spec(name, outside) is not None
    return False


@contextlib.contextmanager
def _standard_imports(project_dir: Path) -> Iterator[None]:
    """Imports at first use resolved without the project's folders on ``sys.path``: a file of the
    project named after a module of the standard library is never run for it (pytest puts a
    conftest's folder first)."""
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if not _inside(p, project_dir)]
    try:
        yield
    finally:
        sys.path[:] = saved


def _folder_prefix(folder: str) -> str:
    """What every path beneath ``folder`` (a real path) starts with, and nothing else does."""
    return folder.rstrip("/") + "/"


def of_project(spec: Spec, tasks: Iterable[Any]) -> dict[str, str]:
    """The whole harness: the adapter and every project module it imports or names in a string
    (read, not run); the microcases, ``split_ids_file``, every ``conftest.py`` and the
    ``harness_files`` globs; the pytest config section, its location, conftests above the
    project (:func:`conftest_digests`) and pytest's variables; the interpreter's start-up hooks
    (:mod:`.startup_hooks`); and the task pool's digest under :data:`TASKS_KEY`."""
    # the microcases a session loads, sub-folders included: one list for both, so none runs unlocked
    extra = [*microcase.project_files(spec.project_dir)]
    extra += [spec.split_ids_file] if spec.split_ids_file else []
    extra += harness_files(spec.project_dir, spec.harness_files, exclude=[spec.capability_path])
    digests = fingerprint(spec.project_dir, spec.adapter, exclude=[spec.capability_path], extra_files=extra)
    digests.update(pytest_config(spec.project_dir))
    digests.update(pytest_env(os.environ))
    digests.update(startup_hooks.digests())
    digests[TASKS_KEY] = tasks_digest(tasks)
    return digests


def harness_files(project_dir: Path, patterns: Iterable[str], *, exclude: Iterable[Path] = ()) -> list[Path]:
    """The project's files the ``harness_files`` globs name (``default``:
    :data:`DEFAULT_HARNESS_FILES`), outside the run dirs, caches, environments and ``exclude``."""
    globs = [glob for p in patterns for glob in (DEFAULT_HARNESS_FILES if p == DEFAULT_WORD else [p])]
    if not globs:
        return []
    root = project_dir.resolve()
    prefix = len(os.fspath(root)) + 1
    return [
        Path(path)
        for path in _walk(root, skip=exclude)
        if is_protected(path[prefix:].replace(os.sep, "/"), globs)
    ]


def pytest_config(project_dir: Path) -> dict[str, str]:
    """The digest of the pytest section pytest would read (without ``capevolve_*`` keys), and
    that file's location relative to the project, so a config planted above it is seen."""
    root = project_dir.resolve()
    for folder in [root, *root.parents]:
        for name in CONFIG_NAMES:
            section = _pytest_section(folder / name, root)
            if section is None:
                continue  # no pytest section: pytest looks further, and so do we
            # where it is counts, an empty section too: one above the project moves the rootdir
            where = {CONFIG_FILE_KEY: Path(os.path.relpath(folder / name, root)).as_posix()}
            kept = {k: v for k, v in section.items() if not str(k).startswith("capevolve_")}
            if not kept:
                return where
            text = json.dumps(kept, sort_keys=True, default=repr, ensure_ascii=False)
            return {PYTEST_CONFIG_KEY: hashlib.sha256(text.encode("utf-8")).hexdigest(), **where}
    return {CONFIG_FILE_KEY: NO_CONFIG}  # no config file: pytest runs on its defaults


def _pytest_section(path: Path, project_dir: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    with _standard_imports(project_dir):  # here: only a project under a config file parses one
        import configparser
        import tomllib

    try:
        if path.name == "pyproject.toml":
            tool = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {})
            options = tool.get("pytest", {}).get("ini_options") if isinstance(tool, dict) else None
            return dict(options) if isinstance(options, dict) else None
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, tomllib.TOMLDecodeError, configparser.Error):
        # unreadable config: its bytes stand for it (pytest itself will refuse it loudly)
        return {"<bytes>": hashlib.sha256(path.read_bytes()).hexdigest()} if path.is_file() else None
    name = "tool:pytest" if path.name == "setup.cfg" else "pytest"
    if parser.has_section(name):
        return dict(parser.items(name))
    return {} if path.name in ("pytest.ini", ".pytest.ini") else None


def pytest_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Digests of the pytest variables that add options or load plugins, when set."""
    return {
        f"<env {name}>": hashlib.sha256(environ[name].encode("utf-8")).hexdigest()
        for name in PYTEST_ENV
        if environ.get(name)
    }


def tasks_digest(tasks: Iterable[Any]) -> str:
    """One sha256 over the pool's (id, input, target), in order, as canonical JSON."""
    digest = hashlib.sha256()
    # json.dumps with these options builds this encoder once per call (10,000 tasks: 10,000 encoders)
    encode = json.JSONEncoder(sort_keys=True, default=repr, ensure_ascii=False).encode
    for task in tasks:
        row = [getattr(task, "id", None), getattr(task, "input", None), getattr(task, "target", None)]
        digest.update(encode(row).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def changes(locked: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """What differs, one ``path (changed|added|removed)`` each; the task pool as ``the tasks``."""
    comparable = loads_comparable(dict(locked), dict(now))
    out = compare_digests(comparable, dict(locked))
    return [
        item.replace(TASKS_KEY, "the tasks the adapter returns")
        for item in out
        if not item.startswith(startup_hooks.MARKER_KEY)  # the hooks' own lines name them
    ]


def refusal(run_id: str, what: list[str], limit: int = 4, *, finalize: bool = False) -> str:
    """The one line a session or a command prints when the harness moved; a finalize's way on is the
    restore alone (--capevolve-new-run does not apply to it: a new run is measured before it is scored)."""
    shown = ", ".join(what[:limit]) + (f" and {len(what) - limit} more" if len(what) > limit else "")
    way = (
        f"restore those files to finalize run {run_id}: its test split is scored under the harness its "
        "val was measured with (the changed harness is measured in a new run: pytest --capevolve-run "
        "PROJECT --capevolve-new-run, finalized after)"
        if finalize
        else "restore those files, or start a new run (--capevolve-new-run) to measure this one"
    )
    return f"the harness changed since run {run_id} began: {shown}. A run measures one harness: {way}"


def _walk(project_dir: Path, *, skip: Iterable[Path] = ()) -> Iterator[str]:
    """Every file of the project outside :data:`SKIP_DIRS`, environments and ``skip``, symlinks
    not followed; strings and one ``scandir`` per folder, for speed at 60,000 files."""
    skipped = {os.fspath(p.resolve()) for p in skip}
    stack = [os.fspath(project_dir.resolve())]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except PermissionError as exc:  # files the lock cannot see are not left out in silence
            raise PermissionError(
                f"{folder}: the harness lock cannot list this folder of the project ({exc.strerror}); "
                "make it readable, or move it out of the project"
            ) from None
        except OSError:
            continue  # gone since its parent was listed
        for entry in entries:
            if entry.path in skipped or entry.is_symlink():
                continue  # under a resolved root and never through a symlink: already resolved
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIP_DIRS and not os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                    stack.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                yield entry.path


def _import_closure(adapter_file: Path, project_dir: Path | None = None) -> Iterator[Path]:
    """The adapter file and, transitively, every module of its folder it imports and every
    project ``.py`` file a module names in a string, by reading the source."""
    root = adapter_file.parent
    bases = [root, *([project_dir] if project_dir is not None else [])]
    seen: set[Path] = set()
    todo = [adapter_file]
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        yield path
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue  # importing it will fail loudly where it is loaded
        for name in _imported_names(tree, path, root):
            todo.extend(_module_files(root, name))
        for named in _named_paths(tree):
            if named.endswith(".py"):
                todo.extend(
                    (base / named).resolve() for base in (path.parent, *bases) if (base / named).is_file()
                )
            elif named.replace(".", "").replace("_", "").isalnum():  # import_module("pkg.mod")
                todo.extend(_module_files(root, named))


def _named_paths(tree: ast.AST) -> Iterator[str]:
    """String constants, and the constant parts of ``a / "b" / "c.py"`` and
    ``os.path.join(a, "b", "c.py")`` joined with ``/``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 300:
            yield node.value
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts = _div_parts(node)
            if len(parts) > 1:
                yield "/".join(parts)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "join":
            parts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if len(parts) > 1:
                yield "/".join(parts)


def _div_parts(node: ast.expr) -> list[str]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _div_parts(node.left) + _div_parts(node.right)
    return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def _imported_names(tree: ast.AST, path: Path, root: Path) -> Iterator[str]:
    package = ".".join(path.parent.relative_to(root).parts) if path.is_relative_to(root) else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module:
                yield module
            for alias in node.names:  # `from pkg import mod` imports a module too
                yield f"{module}.{alias.name}" if module else alias.name


def _module_files(root: Path, dotted: str) -> Iterator[Path]:
    """Files a dotted import loads from ``root``: each package's ``__init__.py`` and the module."""
    parts = dotted.split(".")
    for i in range(1, len(parts) + 1):
        base = root.joinpath(*parts[:i])
        if (base / "__init__.py").is_file():
            yield (base / "__init__.py").resolve()
        elif base.with_suffix(".py").is_file():
            yield base.with_suffix(".py").resolve()
            return
        else:
            return


def conftest_digests(plugins: Iterable[object], project_dir: Path) -> dict[str, str]:
    """sha256 of each registered ``conftest.py`` in a folder above ``project_dir``, keyed ``<conftest>
    RELATIVE PATH``; those inside are the harness walk's, those elsewhere the command line's business."""
    project = project_dir.resolve()
    found = {}
    for plugin in plugins:
        where = getattr(plugin, "__file__", None)
        if not isinstance(where, str) or os.path.basename(where) != "conftest.py":
            continue
        path = Path(where).resolve()
        if path.parent not in project.parents:
            continue  # in the project (the walk's), or beside it: where the session was started
        relative = Path(os.path.relpath(path, project)).as_posix()
        found[f"{CONFTEST_PREFIX}{relative}"] = startup_hooks.file_sha(path)
    return found


def loads_comparable(locked: dict[str, str], now: dict[str, str]) -> dict[str, str]:
    """``now`` as it compares with ``locked``: with each conftest above the project it holds that this
    session did not load (loading less is no change)."""
    gone = {k: v for k, v in locked.items() if k.startswith(CONFTEST_PREFIX) and k not in now}
    return {**now, **gone}


def pinned(project_dir: Path) -> list[str]:
    """The options that cut a session's conftests at the project (for sessions capevolve starts)."""
    return ["--confcutdir", str(project_dir.resolve())]


def named_plugins(args: Sequence[str]) -> list[str]:
    """The modules ``-p`` loads in ``args`` (``-p no:NAME`` blocks one: not a load)."""
    names, take = [], False
    for arg in map(str, args):
        if take:
            names.append(arg)
            take = False
        elif arg == "-p":
            take = True
        elif arg.startswith("-p") and len(arg) > 2:
            names.append(arg[2:])
    return [n for n in names if n and not n.startswith("no:")]


def plugins_in_project(args: Sequence[str], project_dir: Path) -> list[tuple[str, Path]]:
    """(name, file) of each ``-p`` module whose file is under ``project_dir``."""
    project = project_dir.resolve()
    found = []
    for name in named_plugins(args):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue  # pytest itself says it cannot load it
        origin = getattr(spec, "origin", None) if spec is not None else None
        if origin and Path(origin).resolve().is_relative_to(project):
            found.append((name, Path(origin)))
    return found


def expand(patterns: Iterable[str], adapter_ref: str) -> tuple[str, ...]:
    """The spec's patterns, ``default`` replaced by :data:`DEFAULT_PROTECTED` and the adapter file."""
    out: list[str] = []
    for pattern in patterns:
        if pattern == DEFAULT_WORD:
            adapter_name = Path(adapter_ref.partition(":")[0]).name
            out.extend([*DEFAULT_PROTECTED, adapter_name])
        else:
            out.append(pattern)
    return tuple(dict.fromkeys(out))


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    pattern = pattern.strip()
    if pattern.endswith("/"):
        pattern += "**"
    anchored = "/" in pattern.rstrip("/")
    pattern = pattern.lstrip("/")
    body = "".join(_WILDCARDS.get(part, re.escape(part)) for part in _WILDCARD.split(pattern))
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(prefix + body + r"\Z")


def is_protected(relative: str, patterns: Iterable[str]) -> bool:
    return _any_of(tuple(patterns)).match(relative) is not None


@functools.lru_cache(maxsize=64)
def _any_of(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching what any of ``patterns`` matches (none: nothing): one match per path,
    not one per pattern (a third of the time over a project's files, at each session's start)."""
    return re.compile("|".join(f"(?:{_regex(p).pattern})" for p in patterns) or r"(?!)")


def protected_digests(root: Path, patterns: tuple[str, ...]) -> dict[str, str]:
    """sha256 of every protected file under ``root`` by relative path (refusing outward links)."""
    return file_digests(root, lambda relative: is_protected(relative, patterns))


def tampered(seed_digests: dict[str, str], candidate: Path, patterns: tuple[str, ...]) -> list[str]:
    """Each protected path ``candidate`` changed, added or removed against ``seed_digests``, or
    its symlink that leaves the folder; empty when it may be evaluated."""
    try:
        theirs = protected_digests(candidate, patterns)
    except CandidateError as exc:
        return [f"refused: {exc}"]  # a symlink leaving the folder, a FIFO, a socket, a loop: exc names it
    return compare_digests(theirs, seed_digests)
