"""What pytest itself loads into a capevolve session from above the project: conftests and its
config file, locked with the run.

pytest imports every ``conftest.py`` from its ``confcutdir`` (the rootdir, which an empty config
above the project moves up) down, so a conftest planted above the project would run outside the
harness lock. So those conftests and the config file's location are part of the harness
fingerprint, and the sessions capevolve starts itself are :func:`pinned` at the project. A
``-p NAME`` plugin module in the project is outside the lock too, so it could wrap the scorer: it
is refused (:func:`plugins_in_project`); a project's hooks belong in its locked ``conftest.py``."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from .startup_hooks import file_sha

CONFIG_FILE_KEY = "<pytest config file>"  # in every lock that holds what is here (older: absent)
CONFTEST_PREFIX = "<conftest> "
NO_CONFIG = "none"
CONFIG_NAMES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def conftest_digests(plugins: Iterable[object], project_dir: Path) -> dict[str, str]:
    """sha256 of each registered ``conftest.py`` in a folder above ``project_dir``, keyed
    ``<conftest> RELATIVE PATH``; those inside are the harness walk's, those elsewhere the
    command line's business."""
    project = project_dir.resolve()
    found = {}
    for plugin in plugins:
        where = getattr(plugin, "__file__", None)
        if not isinstance(where, str) or os.path.basename(where) != "conftest.py":
            continue
        path = Path(where).resolve()
        if path.parent not in project.parents:
            continue  # in the project (the walk's), or beside it: where the session was started
        found[f"{CONFTEST_PREFIX}{Path(os.path.relpath(path, project)).as_posix()}"] = file_sha(path)
    return found


def config_file_location(project_dir: Path, found: Path | None) -> dict[str, str]:
    """``{CONFIG_FILE_KEY: where}``: the path, relative to the project (``../pytest.ini``), of
    the config file whose pytest section (empty or not) pytest reads; ``none`` without one."""
    if found is None:
        return {CONFIG_FILE_KEY: NO_CONFIG}
    return {CONFIG_FILE_KEY: Path(os.path.relpath(found, project_dir.resolve())).as_posix()}


def comparable(locked: dict[str, str], now: dict[str, str]) -> dict[str, str]:
    """``now`` as it compares with ``locked``: without what ``locked`` predates, and with each
    conftest above the project it holds that this session did not load (loading less is no change)."""
    if CONFIG_FILE_KEY not in locked:
        return {k: v for k, v in now.items() if k != CONFIG_FILE_KEY and not k.startswith(CONFTEST_PREFIX)}
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
