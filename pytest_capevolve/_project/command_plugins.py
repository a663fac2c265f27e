"""Plugins named on a session's command line (``-p NAME``) that live in the project.

A plugin module in the project is outside the harness lock, so it could wrap the scorer: a
project's hooks belong in its (locked) ``conftest.py``, and a ``-p`` module under it is refused."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path


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
