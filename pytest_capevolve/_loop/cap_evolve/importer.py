"""``capevolve import-cap-evolve SRC [DEST]``: a cap-evolve project made a project here.

Written to DEST, never over an existing file: ``capevolve.yaml`` with every key mapped
(:mod:`.._project.cap_evolve_keys`) and the others listed with why; ``adapters/`` made ours (its
adapter class found without running it, ``from cap_evolve import …`` rewritten to
``pytest_capevolve``, lines with no counterpart listed); the capability folder. A cap-evolve run's
rollouts and decisions are not carried over: our record keeper did not record them and its gate
decided them; the imported project starts with a baseline here. Pays no rollout; imports nothing
of pytest."""

from __future__ import annotations

import ast
import re
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from ..._project.cap_evolve_keys import translate
from ..._project.spec import SPEC_FILENAME, SpecError, load_spec
from ..._project.yamlfile import YamlError, read_yaml
from ...exitcodes import Refusal

OUR_NAMES = frozenset({"CapabilityAdapter", "Rollout", "Score", "Task"})
_IMPORT = re.compile(r"^(\s*)from\s+cap_evolve(?:\.(?:types|adapter))?\s+import\s+(.+?)\s*$")
_OTHER = re.compile(r"^\s*(?:import\s+cap_evolve\b|from\s+cap_evolve[.\w]*\s+import\b)")


def locate_spec(src: Path) -> Path:
    """cap-evolve's spec file for SRC (a spec file, its project folder, or the folder above)."""
    src = src.expanduser().resolve()
    if src.is_file():
        return src
    for candidate in (src / SPEC_FILENAME, src / ".capevolve" / "project" / SPEC_FILENAME):
        if candidate.is_file():
            return candidate
    raise Refusal(
        f"{src}: no cap-evolve spec there (looked for {SPEC_FILENAME} and .capevolve/project/"
        f"{SPEC_FILENAME}); give the project folder or the spec file"
    )


def import_cap_evolve(src: Path, dest: Path) -> dict[str, Any]:
    """Write the project into ``dest``, refused before any write when something is missing or
    taken; a failure halfway removes what it created."""
    spec_path = locate_spec(src)
    project = spec_path.parent
    translation = translate(_read_spec(spec_path))
    spec_keys = dict(translation.spec)
    adapter_dir = project / "adapters"
    if not (adapter_dir / "adapter.py").is_file():
        raise Refusal(f"{adapter_dir / 'adapter.py'} is missing: cap-evolve's adapter lives there")
    adapter_class, adapter_note = adapter_class_of(adapter_dir / "adapter.py")

    dest = dest.expanduser().resolve()
    capability_src, capability_dest = _capability(project, spec_keys)
    splits_dest: Path | None = None
    if spec_keys.get("split_ids_file"):
        splits_dest = Path(Path(str(spec_keys["split_ids_file"])).name)
    writes = [Path(SPEC_FILENAME), Path("adapters"), capability_dest, *filter(None, [splits_dest])]
    taken = [str(dest / p) for p in writes if (dest / p).exists()]
    if taken:
        raise Refusal(f"{', '.join(taken)} already exist(s); import into an empty folder (DEST)")

    created = [dest / p for p in writes]
    if not (dest / ".capevolve").exists():
        created.append(dest / ".capevolve")
    try:
        dest.mkdir(parents=True, exist_ok=True)
        adapter_report = copy_adapter(adapter_dir, dest / "adapters", adapter_class, adapter_note)
        shutil.copytree(capability_src, dest / capability_dest, ignore=shutil.ignore_patterns("__pycache__"))
        spec_keys["capability_path"] = capability_dest.as_posix()
        spec_keys["adapter"] = f"adapters/adapter.py:{adapter_class}"
        if splits_dest is not None:  # a copy of the project's split_ids_file, named in the spec
            shutil.copy2(project / str(spec_keys["split_ids_file"]), dest / splits_dest)
            spec_keys["split_ids_file"] = splits_dest.as_posix()
        # cap-evolve's trial k runs with seed split_seed + k: the same seeds keep trials paired here
        base_seed = spec_keys.setdefault("base_seed", int(spec_keys.get("split_seed") or 0))
        translation.notes["base_seed"] = f"{base_seed}: cap-evolve's trial k runs with seed split_seed + k"
        (dest / SPEC_FILENAME).write_text(
            _spec_text(spec_path, spec_keys, translation.notes), encoding="utf-8"
        )
        try:
            load_spec(dest)
        except SpecError as exc:
            raise Refusal(f"the imported spec is not valid here: {exc}") from None

        report: dict[str, Any] = {
            "project": str(dest),
            "spec": str(dest / SPEC_FILENAME),
            "source": str(spec_path),
            "keys": translation.notes,
            "unknown_keys": translation.unknown,
            "adapter": adapter_report,
        }
    except BaseException:
        _remove(created)  # an import that fails leaves DEST as it found it
        raise
    report["next"] = [f"capevolve check {dest}", f"pytest --capevolve-run {dest}"]
    return report


def _read_spec(spec_path: Path) -> dict[str, Any]:
    """cap-evolve's spec as a mapping (refused when it does not parse or is not one)."""
    try:
        raw = read_yaml(spec_path) or {}
    except YamlError as exc:
        raise Refusal(str(exc)) from None
    if not isinstance(raw, dict):
        raise Refusal(f"{spec_path}: a cap-evolve spec is a mapping of keys to values")
    return raw


def _capability(project: Path, spec_keys: dict[str, Any]) -> tuple[Path, Path]:
    """Where the capability folder is copied from and to (in DEST)."""
    capability = Path(str(spec_keys.get("capability_path") or "seed_capability"))
    capability_dest = (
        Path(capability.name) if capability.is_absolute() or ".." in capability.parts else capability
    )
    capability_src = project / capability
    if not capability_src.is_dir():
        raise Refusal(f"capability folder {capability_src} is missing (cap-evolve key capability_path)")
    return capability_src, capability_dest


def _remove(created: list[Path]) -> None:
    for path in created:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _spec_text(source: Path, keys: dict[str, Any], notes: dict[str, str]) -> str:
    head = [
        f"# Imported from cap-evolve's {source} by `capevolve import-cap-evolve`",
        f"# on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
    ]
    body = [
        yaml.safe_dump({key: keys[key]}, sort_keys=False, allow_unicode=True).rstrip("\n") for key in keys
    ]
    unused = [f"#   {key}: {note}" for key, note in notes.items() if key not in keys]
    if unused:
        unused.insert(0, "# cap-evolve keys not carried over:")
    return "\n".join(head + body + unused) + "\n"


def render(report: dict[str, Any]) -> list[str]:
    """The human form of an import's report (``capevolve import-cap-evolve`` without ``--json``)."""
    lines = [f"imported {report['source']} → {report['spec']}"]
    lines += [f"  {key}: {note}" for key, note in report["keys"].items()]
    adapter = report["adapter"]
    rewritten = len(adapter["rewritten_imports"])
    lines.append(f"adapter: {adapter['file']}:{adapter['class']} ({rewritten} import(s) rewritten)")
    if adapter["class_note"]:
        lines.append(f"  note: {adapter['class_note']}")
    lines += [f"  by hand: {item}" for item in adapter["by_hand"]]
    lines += [f"next: {command}" for command in report["next"]]
    return lines


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
