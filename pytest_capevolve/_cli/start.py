"""``capevolve init`` (a new project that runs offline as written) and ``capevolve skills``
(where the playbooks for coding agents are installed). Neither reads a project."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import exitcodes
from .common import emit

SKILLS = Path(__file__).resolve().parent.parent / "skills"


def cmd_init(args: argparse.Namespace) -> int:
    """Write a runnable project into DIR, or import a cap-evolve one there."""
    if args.from_cap_evolve is not None:
        from .._loop.cap_evolve.importer import import_cap_evolve, render

        emit(args, import_cap_evolve(args.from_cap_evolve, args.dir, None), None if args.json else render)
        return exitcodes.OK
    from .._project.scaffold import write_project

    written = write_project(args.dir.resolve())  # a file in the way: a Refusal, exit 2
    project = args.dir.resolve()
    answer = {
        "project": str(project),
        "files": [str(p.relative_to(project)) for p in written],
        "next": [f"cd {project}", "capevolve check", "capevolve baseline"],
    }

    def lines(answer: dict[str, Any]) -> list[str]:
        return [
            f"wrote a capevolve project in {answer['project']}:",
            *(f"  {name}" for name in answer["files"]),
            "next: " + " && ".join(answer["next"]),
        ]

    return emit(args, answer, lines)


def skill_front_matter(path: Path) -> dict[str, str]:
    """The ``name`` and ``description`` of a SKILL.md's front matter."""
    import yaml

    text = path.read_text(encoding="utf-8")
    head = text.split("---", 2)[1] if text.startswith("---") else ""
    data = yaml.safe_load(head) or {}
    return {"name": str(data.get("name", "")), "description": str(data.get("description", ""))}


def cmd_skills(args: argparse.Namespace) -> int:
    """List the agent playbooks shipped with the package (``--path``: only their folder)."""
    if args.path:
        print(SKILLS)
        return exitcodes.OK
    found = [{**skill_front_matter(p), "path": str(p)} for p in sorted(SKILLS.glob("*/SKILL.md"))]
    return emit(
        args,
        {"skills": found, "path": str(SKILLS)},
        lambda a: [f"{s['name']}: {s['path']}" for s in a["skills"]],
    )


def register(sub: Any) -> None:
    """``init`` and ``skills`` on the ``capevolve`` parser."""
    init = sub.add_parser(
        "init", help="write a new project that runs offline (spec, adapter, capability, microcase, candidate)"
    )
    init.add_argument("dir", type=Path, nargs="?", default=Path("."), help="where to write it (default .)")
    init.add_argument(
        "--from-cap-evolve",
        type=Path,
        metavar="SRC",
        help="import a cap-evolve project instead (as capevolve import-cap-evolve SRC DIR)",
    )
    init.add_argument("--json", action="store_true", help="print only JSON on stdout (the rest to stderr)")
    init.set_defaults(func=cmd_init, refusals=True)
    skills = sub.add_parser("skills", help="the playbooks for coding agents shipped with the package")
    skills.add_argument("--path", action="store_true", help="print only the folder that holds them")
    skills.add_argument("--json", action="store_true", help="print only JSON on stdout (the rest to stderr)")
    skills.set_defaults(func=cmd_skills)
