"""A refusal's way on as a command the user can paste: ``PROJECT`` made the project's path, and in a
pytest session the user's own flags (``-n 2``, ``-o KEY=VALUE``) in each ``pytest --capevolve-…``."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

_PROJECT = re.compile(r"\bPROJECT\b")
_SESSION = re.compile(r"\bpytest (?=--capevolve-)")


def shown(project_dir: Path) -> str:
    """The project as a command names it: relative to the current folder when that is shorter."""
    absolute = str(Path(project_dir).absolute())
    relative = os.path.relpath(absolute) if os.name != "nt" else absolute  # Windows: maybe another drive
    return min(relative, absolute, key=len)


def pasteable(text: str, project_dir: Path | None = None, args: Sequence[str] | None = None) -> str:
    """``text`` with ``PROJECT`` the project's path and, given the session's arguments, the user's own
    flags in every ``pytest --capevolve-…`` command it names."""
    if project_dir is not None:
        text = _PROJECT.sub(shlex.quote(shown(project_dir)).replace("\\", "\\\\"), text)
    flags = own_flags(args or ())
    return _SESSION.sub(f"pytest {shlex.join(flags)} ".replace("\\", "\\\\"), text) if flags else text


def own_flags(args: Sequence[str]) -> list[str]:
    """The user's flags among a session's arguments: all but capevolve's options and their values."""
    args = [str(a) for a in args]
    ours = [i for i, a in enumerate(args) if a.startswith("--capevolve-")]
    values = {
        i + 1 for i in ours if "=" not in args[i] and not (args[i + 1 : i + 2] or ["-"])[0].startswith("-")
    }
    return [a for i, a in enumerate(args) if i not in ours and i not in values]
