"""The boundary an optimizer works in: its work copies and a scratch folder, and nothing else.

For ``capevolve hill-climb``'s optimizer command and ``capevolve agent``: it may write its work
copies, its scratch ``TMPDIR`` and ``--writable`` folders outside the project, and read the
machine but the run dirs and the project's gold files. Nothing above the project is writable, so
no ``conftest.py`` or ``pytest.ini`` can be planted where pytest would find it. Where the kernel
cannot hold it (:mod:`.._confine.landlock`), the optimizer runs unconfined and the record says so."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .._confine.landlock import Boundary
from .._project import harness
from .._project.spec import Spec
from ..exitcodes import Refusal

RUNS_FOLDER = ".capevolve"


def gold_files(spec: Spec) -> list[Path]:
    """The project's files an optimizer may not read: its evaluation data and split ids."""
    patterns = [*spec.harness_files, harness.DEFAULT_WORD]
    files = harness.harness_files(spec.project_dir, patterns, exclude=[spec.capability_path])
    if spec.split_ids_file is not None:
        files.append(spec.split_ids_file.resolve())
    return sorted(set(files))


def optimizer_boundary(
    spec: Spec, writable: Iterable[Path], readable: Iterable[Path] = (), also_writable: Iterable[Path] = ()
) -> Boundary:
    """The boundary of an optimizer that may write ``writable`` and ``also_writable`` (checked:
    :func:`checked_writable`) and read ``readable`` (its prompt, say) besides the project."""
    hidden = (spec.project_dir.resolve() / RUNS_FOLDER, *gold_files(spec))
    extra = checked_writable(spec, also_writable)
    return Boundary(
        writable=tuple(Path(p) for p in (*writable, *extra)),
        readable=tuple(Path(p) for p in readable),
        hidden=hidden,
        read_all=True,
        listable=(spec.project_dir.resolve(),),  # `ls`, and globs such as .capevolve/runs/*/work/TAG
    )


def checked_writable(spec: Spec, folders: Iterable[Path]) -> tuple[Path, ...]:
    """``--writable`` folders (or files), refused when one is the project, inside it or holds it."""
    project = spec.project_dir.resolve()
    out = []
    for folder in folders:
        real = Path(os.path.realpath(folder.expanduser()))
        if real == project or project in real.parents or real in project.parents:
            raise Refusal(
                f"--writable {folder}: the optimizer may not write the project, a folder in it or one "
                "holding it (the record and the harness are there); name a folder outside the "
                "project, such as the agent's own state folder"
            )
        if not real.exists():
            raise Refusal(f"--writable {folder}: no such file or folder; create it first")
        out.append(real)
    return tuple(out)
