"""What pytest itself loads into a capevolve session: conftests and its config file, held to
the project.

pytest imports every ``conftest.py`` from its ``confcutdir`` down to the folder it starts in,
and ``confcutdir`` defaults to the rootdir, which an empty ``setup.py`` or a ``pytest.ini`` with
an empty ``[pytest]`` section one folder *above* the project moves there. A ``conftest.py``
planted beside it then ran in the process that scores and decides — outside the harness lock,
which walks the project only (and digested an empty section as "no config"). So:

- **pinned**: every capevolve session (the ones a person types, the ones capevolve starts, and
  each xdist worker) cuts conftests at the project folder: :func:`pinned_confcutdir`, applied
  in ``pytest_load_initial_conftests`` before any conftest is imported;
- **refused**: a conftest registered from outside the project anyway (pytest also loads the one
  of the folder it was started in, when that folder is beside the project) stops the session in
  one line before anything is planned: :func:`conftests_outside`;
- **locked**: the location of the config file pytest reads for the project (an empty section
  counts) is part of the harness fingerprint (:func:`config_file_location`): a config file
  planted above the project after the run began is a changed harness, refused like any other.

The rootdir itself is not locked: it also depends on the folder a session is started in, and
with conftests cut at the project nothing a session loads or decides follows it.

Pure reads: paths in, paths and digests out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

CONFIG_FILE_KEY = "<pytest config file>"  # absent from locks taken before it was held
NO_CONFIG = "none"
CONFIG_NAMES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def pinned_confcutdir(given: str | None, project_dir: Path, invocation_dir: Path) -> str:
    """The ``confcutdir`` a session of ``project_dir`` runs with: the project folder, or a
    folder inside it when one was given (``--confcutdir``, resolved from ``invocation_dir``)."""
    project = project_dir.resolve()
    if given:
        asked = (invocation_dir / given).resolve()
        if asked.is_relative_to(project):
            return str(asked)
    return str(project)


def conftests_outside(plugins: Iterable[object], project_dir: Path) -> list[Path]:
    """The ``conftest.py`` modules among ``plugins`` (a plugin manager's, as registered) whose
    file is outside ``project_dir``."""
    project = project_dir.resolve()
    found = []
    for plugin in plugins:
        where = getattr(plugin, "__file__", None)
        if not isinstance(where, str) or os.path.basename(where) not in ("conftest.py", "conftest.pyc"):
            continue
        path = Path(where).resolve()
        if not path.is_relative_to(project):
            found.append(path)
    return sorted(found)


def refusal(found: list[Path], project_dir: Path) -> str:
    shown = ", ".join(str(p) for p in found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return (
        f"pytest loaded {shown}, a conftest.py outside the project {project_dir}: its hooks would run "
        "in the process that scores and decides, outside the harness lock. pytest loads the conftest "
        "of the folder a session starts in: start the session from the project folder "
        f"(cd {project_dir}), or remove that file"
    )


def config_file_location(project_dir: Path, sections: Iterable[tuple[Path, bool]]) -> dict[str, str]:
    """``{CONFIG_FILE_KEY: where}``: the path, relative to the project (``../pytest.ini``), of
    the first file of ``sections`` (``(path, holds a pytest section)`` in pytest's search
    order) that holds a pytest section, empty or not; ``none`` when no file does."""
    for path, has_section in sections:
        if has_section:
            return {CONFIG_FILE_KEY: Path(os.path.relpath(path, project_dir.resolve())).as_posix()}
    return {CONFIG_FILE_KEY: NO_CONFIG}


def comparable(locked: dict[str, str], now: dict[str, str]) -> dict[str, str]:
    """``now`` without the config file's location when ``locked`` predates it."""
    if CONFIG_FILE_KEY in locked:
        return now
    return {k: v for k, v in now.items() if k != CONFIG_FILE_KEY}
