"""What a sandbox child may reach: the :class:`.._confine.landlock.Boundary` candidate code runs in.

Computed in the scoring process from the spec; applied by each child to itself before it loads
the adapter. It may **write** its scratch (its ``TMPDIR``) and the spec's ``sandbox_writable``;
**read** everything **but** the project's ``.capevolve/``, the gold files (``harness_files``)
and the shared ledger; and (ABI ≥ 6) not signal the session that scores it. Gold is read by
the scoring process only: tasks reach the child pickled.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .._confine.landlock import Boundary
from .._project.harness import harness_files
from .._project.spec import Spec

RUN_DIR_NAME = ".capevolve"

# what a refused open, write or rename looks like in an infra error (EACCES, EPERM; EXDEV for a
# rename or link the boundary's folders do not both allow)
_REFUSED = re.compile(r"(?:PermissionError|OSError): \[Errno (?:13|1|18)\] [^:']*: '([^']*)'")


@dataclass(frozen=True)
class Fence:
    """The fixed part of every child's boundary for one project (the scratch and the candidate's
    folder are added per child)."""

    hidden: tuple[Path, ...]
    writable: tuple[Path, ...] = ()

    @classmethod
    def of_project(
        cls,
        project_dir: Path,
        *,
        gold: tuple[Path, ...] = (),
        writable: tuple[Path, ...] = (),
        ledger: Path | None = None,
    ) -> Fence:
        """The project's ``.capevolve/`` (its runs and its memory), ``gold`` and a shared ledger
        hidden; ``writable`` granted."""
        hidden = [project_dir / RUN_DIR_NAME, *gold, *([ledger] if ledger is not None else [])]
        return cls(tuple(dict.fromkeys(Path(os.path.abspath(p)) for p in hidden)), writable)

    @classmethod
    def of_spec(cls, spec: Spec) -> Fence:
        gold = harness_files(spec.project_dir, spec.harness_files, exclude=[spec.capability_path])
        return cls.of_project(
            spec.project_dir, gold=tuple(gold), writable=writable_paths(spec), ledger=spec.shared_ledger
        )

    def explain(self, infra_error: str) -> str:
        """``infra_error`` with the way on added when it is a refusal of this boundary (a
        ``PermissionError`` naming a path), for a confined child's rollout."""
        refused = _REFUSED.search(infra_error)
        if refused is None:
            return infra_error
        path = Path(os.path.abspath(refused.group(1)))
        if any(path == hidden or hidden in path.parents for hidden in self.hidden):
            return (
                f"{infra_error} (candidate code runs confined, and {path} is hidden from it: the run "
                "dir and the gold files (harness_files) are read by tasks() and score(), in the "
                "scoring process, never from live() or run_target)"
            )
        for folder in self.writable:
            if path == folder or folder in path.parents:
                if folder.is_dir():
                    return infra_error  # granted: refused by the file's own mode, not the boundary
                return (
                    f"{infra_error} (candidate code runs confined: the spec's sandbox_writable names "
                    f"{folder}, which does not exist, so nothing in it was granted; create the folder "
                    "before the session)"
                )
        named = ", ".join(str(p) for p in self.writable) or "none yet"
        return (
            f"{infra_error} (candidate code runs confined: live() and run_target may write only "
            f"their TMPDIR and the folders the spec's sandbox_writable names ({named}); name the "
            "folder it writes in sandbox_writable in capevolve.yaml (a folder that exists: create it "
            "first; the changed spec starts a new run, --capevolve-new-run), or write scratch files "
            "under TMPDIR)"
        )

    def boundary(self, candidate_dir: Path, scratch: Path) -> Boundary:
        """This fence around one child: ``scratch`` writable, ``candidate_dir`` readable even inside
        the hidden run dir; ValueError when a ``sandbox_writable`` folder holds or lies inside a
        hidden one (granting it would open what the boundary hides)."""
        for folder in self.writable:
            real = Path(os.path.realpath(folder))
            for hidden in self.hidden:
                shut = Path(os.path.realpath(hidden))
                if real == shut or real in shut.parents or shut in real.parents:
                    raise ValueError(
                        f"the spec's sandbox_writable names {folder}, which "
                        f"{'holds' if real in shut.parents else 'is or lies inside'} {hidden}, hidden from "
                        "candidate code; name a folder of its own for what live() writes (e.g. .agent/skills)"
                    )
        return Boundary(
            writable=(scratch, *self.writable),
            readable=(Path(os.path.abspath(candidate_dir)),),
            hidden=self.hidden,
            read_all=True,
        )


def writable_paths(spec: Spec) -> tuple[Path, ...]:
    """The spec's ``sandbox_writable`` as absolute paths (relative ones: to the project)."""
    return tuple(
        Path(os.path.abspath(spec.project_dir / Path(p).expanduser())) for p in spec.sandbox_writable
    )
