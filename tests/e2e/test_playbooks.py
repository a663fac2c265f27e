"""The playbooks shipped for coding agents (pytest_capevolve/skills/*/SKILL.md): each one's
commands, played in order on a fresh ``capevolve init`` project whose ``optimizer.py`` is the
scripted proposer, all inside one ``capevolve agent --`` as an agent runs them, exit and
print as the playbook says (tests/docs_commands.py): what they tell an agent works through the
broker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from docs_commands import commands, environment, play

from pytest_capevolve._cli.main import main

# the pages' gains are checked against typical draws, in every session they start (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("typical_seed_draws")

SKILLS = Path(__file__).resolve().parents[2] / "pytest_capevolve" / "skills"
PLAYBOOKS = ["capevolve-optimize", "capevolve-hill-climb"]


def front_matter(name: str) -> dict:
    text = (SKILLS / name / "SKILL.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---", 2)[1])


@pytest.mark.confined  # as an agent runs them: inside the boundary, where the kernel offers one
@pytest.mark.parametrize("name", PLAYBOOKS)
def test_a_playbook_plays_on_a_fresh_init_project(name: str, tmp_path: Path) -> None:
    meta = front_matter(name)
    assert meta["name"] == name and len(meta["description"]) > 40
    text = (SKILLS / name / "SKILL.md").read_text(encoding="utf-8")
    assert len(commands(text)) >= 6
    assert main(["init", str(tmp_path / "project")]) == 0
    play(text, tmp_path / "project", inside=("capevolve", "agent", "--"))
    run = next((tmp_path / "project" / ".capevolve" / "runs").iterdir())
    assert (run / "seal.json").is_file()  # every playbook ends sealed and measured
    assert json.loads((run / "state.json").read_text())["best_id"] != "seed"


def test_the_optimize_playbook_walks_the_whole_loop_in_order() -> None:
    """The steps the issue asks of the playbook, in the order an agent takes them."""
    lines = [c.line for c in commands((SKILLS / "capevolve-optimize" / "SKILL.md").read_text())]
    steps = [
        "capevolve check",
        "capevolve baseline",
        "capevolve spend",
        "capevolve diagnose",
        "capevolve work new",
        "pytest microcases",
        "--capevolve-screen",
        "--capevolve-gate",
        "capevolve commit",
        "capevolve merge",
        "--capevolve-finalize",
        "capevolve measure",
    ]
    at = [next(i for i, line in enumerate(lines) if step in line) for step in steps]
    assert at == sorted(at)
    assert any("--reject-basis" in line for line in lines)


def test_capevolve_skills_path_is_where_the_playbooks_are_installed() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest_capevolve._cli.main", "skills", "--path"],
        capture_output=True,
        text=True,
        env=environment(),
        check=True,
    ).stdout
    folder = Path(out.strip())
    assert sorted(p.parent.name for p in folder.glob("*/SKILL.md")) == sorted(PLAYBOOKS)
    listed = subprocess.run(
        [sys.executable, "-m", "pytest_capevolve._cli.main", "skills", "--json"],
        capture_output=True,
        text=True,
        env=environment(),
        check=True,
    ).stdout
    assert [s["name"] for s in json.loads(listed)["skills"]] == sorted(PLAYBOOKS)
