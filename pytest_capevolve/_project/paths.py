"""How a run dir stores a path, so that the run belongs to its project wherever it lives.

A path inside the project is kept relative to it, one outside absolutely. :func:`rebase` maps an
absolute path an older run dir holds to today's relative form."""

from __future__ import annotations

from pathlib import Path


def to_stored(path: Path, project_dir: Path) -> str:
    """``path`` as a run dir stores it: posix and relative to ``project_dir`` when inside it
    (``"."`` for the folder itself), absolute otherwise. Both are resolved first."""
    path, project_dir = path.resolve(), project_dir.resolve()
    return path.relative_to(project_dir).as_posix() if path.is_relative_to(project_dir) else str(path)


def rebase(stored: str, old_project_dir: str | Path | None) -> str:
    """An absolute path from an older run dir in today's stored form: relative when it lies in
    ``old_project_dir``, else as is (lexically: that folder may be gone)."""
    path = Path(stored)
    if old_project_dir is None or not path.is_absolute() or not Path(old_project_dir).is_absolute():
        return stored
    return path.relative_to(old_project_dir).as_posix() if path.is_relative_to(old_project_dir) else stored
