"""The harness a run measures with: the adapter and what it imports, its data and config files,
the microcases, every ``conftest.py`` — and the tasks themselves.

A run compares candidates under one definition of "better". An optimizer with a shell can
change that definition without touching a candidate: edit the scorer in ``adapter.py``, a gold
answer in the task file, or plant a ``conftest.py`` whose hooks
rewrite reports. So the harness is fingerprinted when the run begins (an event in the log) and
every later session, and every command that books a decision, compares it with the files as
they are now: a changed harness is refused in one line — a new run measures a new harness.

What counts (relative to the project folder; the capability and the run dirs never count, a
candidate is the tamper guard's business):

- the adapter file and every module it imports from the project, found by reading the imports
  (not by running them: the controller of an xdist session never imports the adapter);
- the microcase files, the ``split_ids_file``, and any ``conftest.py`` anywhere in the project;
- a digest of the task pool the adapter returns (ids, inputs and targets), so task data read
  from anywhere — a JSON file, a database, a package — is held too.

Not held: other files the adapter reads at run time (a model config, a price table) — the
adapter's folder is also where adapters write their logs and caches, so its files cannot all be
harness; and the spec, which ``spec.lock.yaml`` holds to its frozen keys. The threat model says so.

Pure: paths in, digests out; the run dir records them (:mod:`.._store`), sessions compare.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .candidate import compare_digests
from .microcase import MICROCASES_DIR
from .spec import Spec

# folders never walked for conftest.py: run dirs, caches, environments, VCS
SKIP_DIRS = frozenset({".capevolve", ".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", ".tox"})
TASKS_KEY = "<tasks>"


class HarnessChanged(Exception):
    """The harness differs from the one the run began with; the message names what changed."""


def fingerprint(
    project_dir: Path,
    adapter_ref: str,
    *,
    exclude: Iterable[Path] = (),
    extra_files: Iterable[Path] = (),
) -> dict[str, str]:
    """sha256 of every harness file, keyed by its path relative to ``project_dir``.

    ``exclude``: folders that are candidates, not harness (the capability path, work copies).
    ``extra_files``: the microcases and the split ids file. Missing extra files are skipped (the
    spec's own validation reports them).
    """
    project_dir = project_dir.resolve()
    skip = [p.resolve() for p in exclude]
    adapter_file = (project_dir / adapter_ref.partition(":")[0]).resolve()
    files: set[Path] = set(_import_closure(adapter_file))
    files.update(_conftests(project_dir))
    files.update(p.resolve() for p in extra_files if p.is_file())
    digests = {}
    for path in sorted(files):
        if any(path.is_relative_to(s) for s in skip) or not path.is_relative_to(project_dir):
            continue
        digests[path.relative_to(project_dir).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def of_project(spec: Spec, tasks: Iterable[Any]) -> dict[str, str]:
    """The whole harness of ``spec``'s project: its files' digests, and the task pool's under
    :data:`TASKS_KEY`."""
    folder = spec.project_dir / MICROCASES_DIR
    microcases = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]) if folder.is_dir() else []
    extra = [*microcases, *([spec.split_ids_file] if spec.split_ids_file else [])]
    digests = fingerprint(spec.project_dir, spec.adapter, exclude=[spec.capability_path], extra_files=extra)
    digests[TASKS_KEY] = tasks_digest(tasks)
    return digests


def tasks_digest(tasks: Iterable[Any]) -> str:
    """One sha256 over the pool's (id, input, target), in the adapter's order, canonical JSON
    (anything JSON cannot hold by its ``repr``)."""
    digest = hashlib.sha256()
    for task in tasks:
        row = [getattr(task, "id", None), getattr(task, "input", None), getattr(task, "target", None)]
        digest.update(json.dumps(row, sort_keys=True, default=repr, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def changes(locked: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """What differs, one ``path (changed|added|removed)`` each; the task pool as ``the tasks``."""
    out = compare_digests(dict(now), dict(locked))
    return [item.replace(TASKS_KEY, "the tasks the adapter returns") for item in out]


def refusal(run_id: str, what: list[str], limit: int = 4) -> str:
    """The one line a session or a command prints when the harness moved."""
    shown = ", ".join(what[:limit]) + (f" and {len(what) - limit} more" if len(what) > limit else "")
    return (
        f"the harness changed since run {run_id} began: {shown}. A run measures one harness: "
        "restore those files, or start a new run (--capevolve-new-run) to measure this one"
    )


def _conftests(project_dir: Path) -> Iterator[Path]:
    stack = [project_dir]
    while stack:
        folder = stack.pop()
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir():
                if entry.name not in SKIP_DIRS and not (entry / "pyvenv.cfg").exists():
                    stack.append(entry)
            elif entry.name == "conftest.py":
                yield entry.resolve()


def _import_closure(adapter_file: Path) -> Iterator[Path]:
    """The adapter file and every module of its folder it imports, transitively, by reading the
    source (an import that cannot be resolved to a file there is someone else's: skipped)."""
    root = adapter_file.parent
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
