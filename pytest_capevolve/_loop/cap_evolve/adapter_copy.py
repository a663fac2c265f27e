"""A cap-evolve project's ``adapters/`` made ours: its adapter class found, its imports rewritten
(``from cap_evolve import …`` → ``pytest_capevolve``), lines with no counterpart listed."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path
from typing import Any

from ...exitcodes import Refusal

OUR_NAMES = frozenset({"CapabilityAdapter", "Rollout", "Score", "Task"})
_IMPORT = re.compile(r"^(\s*)from\s+cap_evolve(?:\.(?:types|adapter))?\s+import\s+(.+?)\s*$")
_OTHER = re.compile(r"^\s*(?:import\s+cap_evolve\b|from\s+cap_evolve[.\w]*\s+import\b)")


def adapter_class_of(path: Path) -> tuple[str, str | None]:
    """The adapter class in cap-evolve's ``adapters/adapter.py``, read without running it:
    ``Adapter`` (as cap-evolve's loader takes it), else the one class that subclasses
    ``CapabilityAdapter`` or defines ``run_target`` (with a note); none or several is refused."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise Refusal(f"{path} does not parse as Python ({exc}); fix it, then import again") from None
    bound: set[str] = set()
    classes: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bound.add(node.name)
            bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            if "CapabilityAdapter" in bases or "run_target" in methods:
                classes.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if "Adapter" in bound:
        return "Adapter", None
    if len(classes) == 1:
        return classes[0], (
            f"{path.name} binds no name `Adapter` (cap-evolve's loader instantiates `Adapter`); "
            f"used {classes[0]}, its one class subclassing CapabilityAdapter or defining run_target"
        )
    found = f"classes {', '.join(classes)} all look like one" if classes else "no class looks like one"
    raise Refusal(
        f"{path}: no adapter class named `Adapter` (the name cap-evolve loads), and {found} "
        "(subclassing CapabilityAdapter or defining run_target); add `Adapter = YourClass` to it, "
        "then import again"
    )


def copy_adapter(source: Path, dest: Path, adapter_class: str, note: str | None) -> dict[str, Any]:
    """Copy ``adapters/``; in its Python files, cap-evolve's contract types come from here."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    rewritten: list[str] = []
    by_hand: list[str] = []
    for path in sorted(dest.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        for number, line in enumerate(lines, 1):
            where = f"{path.relative_to(dest.parent)}:{number}"
            match = _IMPORT.match(line.rstrip("\n"))
            names = {n.strip().split(" as ")[0] for n in match[2].strip("()").split(",")} if match else set()
            if match and names and names <= OUR_NAMES:
                lines[number - 1] = f"{match[1]}from pytest_capevolve import {match[2]}\n"
                rewritten.append(where)
            elif _OTHER.match(line):
                by_hand.append(
                    f"{where}: {line.strip()!r} has no counterpart here (pytest_capevolve exports "
                    f"{', '.join(sorted(OUR_NAMES))}); adapt it by hand"
                )
        path.write_text("".join(lines), encoding="utf-8")
    return {
        "file": "adapters/adapter.py",
        "class": adapter_class,
        "class_note": note,
        "rewritten_imports": rewritten,
        "by_hand": by_hand,
    }
